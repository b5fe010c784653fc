package proto

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// What one agent connection may cost the host, whatever the guest sends.
// Every message kind is bounded:
//
//	frame         MaxFrame (1 MiB) before allocation, one frame at a time
//	stdout/err    the session's window per stream (Exec.Window ≤ MaxWindow)
//	              of data, held in at most twice that (Inbox), whatever
//	              the frame sizes
//	stdin credit  MaxWindow per session (more is ErrViolation)
//	sessions      MaxSessions at once, and only the host opens them
//	ping          one Pong pending; Pings meanwhile go unanswered
//	events        handed to OnEvent synchronously: nothing else is read
//	              meanwhile, so the caller's cost per event bounds the rate
//	unknown, Error{ID 0}, frames of sessions the client does not have,
//	Frozen/Thawed nobody waits for
//	              ignored after a rate-limited log line
//	held sends    while frozen (Freeze to Thaw) the host's own frames
//	              queue, bounded by its credit and its callers
//
// A frame that breaks the protocol ends the connection (ErrViolation); the
// host process never grows with what the guest sends.

// MaxSessions bounds the commands running in the guest at once through one
// client. Each costs at most two output windows of data, each held in at
// most twice its size, so the bound on memory is MaxSessions × 4 × the
// window (1 GiB at the default 256 KiB window, reached only by a host that
// starts that many commands and a guest that alternates small and large
// frames; 512 MiB with frames of one size).
const MaxSessions = 1024

// maxLogText bounds what of a peer's free text goes into one log line: an
// Error's message may fill a frame (1 MiB).
const maxLogText = 256

// logText is s as far as a log line keeps it.
func logText(s string) string {
	if len(s) <= maxLogText {
		return s
	}
	return s[:maxLogText] + "…"
}

// logLimit logs the 1st, 2nd, 4th, 8th, … occurrence of what a hostile peer
// can repeat at will, so that it cannot flood the host's log.
type logLimit struct{ n atomic.Int64 }

func (l *logLimit) warn(log *slog.Logger, msg string, args ...any) {
	l.log(log, slog.LevelWarn, msg, args...)
}

// debug is warn for what a healthy agent does too (the output of a
// session the host cancelled, still on the wire).
func (l *logLimit) debug(log *slog.Logger, msg string, args ...any) {
	l.log(log, slog.LevelDebug, msg, args...)
}

func (l *logLimit) log(log *slog.Logger, level slog.Level, msg string, args ...any) {
	n := l.n.Add(1)
	if n&(n-1) != 0 {
		return
	}
	log.Log(context.Background(), level, msg, append(args, "occurrences", n)...)
}
