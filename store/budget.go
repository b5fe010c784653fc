package store

import (
	"fmt"
	"log/slog"
	"time"
)

// A session's byte budget counts the bytes of its events as encoded, keys
// included (Counts.Bytes): what the Writer hands pebble. On disk a
// session's files take at most about that much — 0.40x measured in
// TestBudgetOnDisk with 4 MiB memtables (0.89x with 32 MiB ones): the
// write-ahead log holds the same bytes until its memtable is flushed, the
// flushed tables less, compressed. pebble also preallocates 110 % of the
// memtable (4.4 MiB) for each write-ahead log (the live one and those kept
// for reuse: 4 in that test), a fixed cost that the disk reserve's floor is
// there to absorb. The session record, rewritten with every
// batch, is not counted.
//
// Past the budget, Admit refuses, so what still arrives is mostly refusals
// and the aggregates of dropped traffic; those are stored for an allowance
// of a sixteenth of the budget, at most 16 MiB (at the netstack's 50
// events a second per reason, ~200 bytes each, hours of refusals), and
// after that counted, not stored.
const maxAllowance = 16 << 20

// budgetOf returns the budget and the allowance for Options.MaxSessionBytes.
func budgetOf(max int64) (budget, allowance int64) {
	switch {
	case max < 0:
		return 0, 0
	case max == 0:
		max = DefaultMaxSessionBytes
	}
	return max, min(max/16, maxAllowance)
}

// checkBudgetLocked notes, once, that the session has stored its budget:
// in the log, and in the record itself.
func (w *Writer) checkBudgetLocked() {
	if w.overBudget || w.budget == 0 || w.bytes < w.budget {
		return
	}
	w.overBudget = true
	msg := w.budgetMessage()
	slog.Warn("store: "+msg, "session", w.id, "bytes", w.bytes, "limit", w.budget)
	w.putRecordingLocked(Recording{State: RecordingOverBudget, Detail: msg}, time.Now())
}

func (w *Writer) budgetMessage() string {
	return fmt.Sprintf("session %s has stored %s, its limit (--max-session-bytes): new flows and requests are refused; "+
		"end the session and start a new one, or raise the limit", w.id, FormatSize(w.bytes))
}
