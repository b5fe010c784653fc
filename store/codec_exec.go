package store

// Exec events: field numbers 256–319. They are on disk in every store (see
// the format in codec.go): never change or reuse one; a new field takes
// the next number and becomes execKnown.
const (
	fExecArgv     = 256 // repeated string
	fExecDir      = 257
	fExecTTY      = 258 // bool
	fExecPID      = 259
	fExecStart    = 260 // Unix nanoseconds, present unless the zero time
	fExecDuration = 261 // nanoseconds
	fExecExitCode = 262
	fExecSignal   = 263
)

// The Exec block (lo inclusive, hi exclusive) and the highest number this
// build knows in it.
const execLo, execHi, execKnown = 256, 320, fExecSignal

var signals = []string{"KILL", "TERM", "INT", "HUP"}

func (x *Exec) appendTo(b []byte) []byte {
	b = appendStrings(b, fExecArgv, x.Argv)
	b = appendString(b, fExecDir, x.Dir)
	b = appendBool(b, fExecTTY, x.TTY)
	b = appendInt(b, fExecPID, int64(x.PID))
	b = appendTime(b, fExecStart, x.Start)
	b = appendInt(b, fExecDuration, int64(x.Duration))
	b = appendInt(b, fExecExitCode, int64(x.ExitCode))
	b = appendString(b, fExecSignal, x.Signal)
	return b
}

func (x *Exec) setField(f field) error {
	switch f.num {
	case fExecArgv:
		return addString(&f, &x.Argv)
	case fExecDir:
		return setString(&f, &x.Dir)
	case fExecTTY:
		return setBool(&f, &x.TTY)
	case fExecPID:
		return setInt(&f, &x.PID)
	case fExecStart:
		return setTime(&f, &x.Start)
	case fExecDuration:
		return setInt(&f, &x.Duration)
	case fExecExitCode:
		return setInt(&f, &x.ExitCode)
	case fExecSignal:
		return setIntern(&f, &x.Signal, signals)
	}
	return nil
}
