package store

// Recording events: field numbers 448–511. They are on disk in every store
// (see the format in codec.go): never change or reuse one; a new field
// takes the next number and becomes recKnown.
const (
	fRecState  = 448
	fRecDetail = 449
	fRecCount  = 450
)

// The Recording block (lo inclusive, hi exclusive) and the highest number
// this build knows in it.
const recLo, recHi, recKnown = 448, 512, fRecCount

var recordingStates = []string{RecordingOverBudget, RecordingDiskLow, RecordingResumed, RecordingUnstored, RecordingAuditBehind, RecordingAuditResumed}

func (r *Recording) appendTo(b []byte) []byte {
	b = appendString(b, fRecState, r.State)
	b = appendString(b, fRecDetail, r.Detail)
	b = appendInt(b, fRecCount, r.Count)
	return b
}

func (r *Recording) setField(f field) error {
	switch f.num {
	case fRecState:
		return setIntern(&f, &r.State, recordingStates)
	case fRecDetail:
		return setString(&f, &r.Detail)
	case fRecCount:
		return setInt(&f, &r.Count)
	}
	return nil
}
