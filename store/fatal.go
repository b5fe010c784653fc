package store

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// fatal is what pebble's Fatalf does: pebble met an error it cannot go on
// from (a write that failed even after diskWatch.enospc waited for space, a
// manifest it could not write) and must not return to its caller. The
// store is marked broken: every writer fails (Admit refuses, Append counts
// events as lost, End and Close return without waiting for pebble), and the
// events already synced stay in the write-ahead log for the next Open. It
// reports whether the calling goroutine should be parked rather than panic:
// a process that records a session (capsem run, capsem-net), or is ending
// one, must outlive its store — the guest keeps running, refused, and the
// user is told; End and Close return, waiting on broken rather than on the
// parked write — while a process that only reads or imports had better
// stop with the message. A store that ever began a session parks: a write
// of one (the committer's last commit, End's end record) may meet the
// fatal error after stop or End already returned on broken, when no writer
// is open any more (End's own write of the end record can).
func (s *Store) fatal(err error) (park bool) {
	s.brokenOnce.Do(func() {
		s.brokenErr = err
		close(s.broken)
	})
	ws := s.openWriters()
	for _, w := range ws {
		w.mu.Lock()
		if w.err == nil {
			w.failLocked(err, w.inFlight)
		}
		w.mu.Unlock()
	}
	return s.recorded.Load() || len(ws) > 0 || s.ending.Load() > 0
}

// brokenError returns the error fatal recorded, or nil.
func (s *Store) brokenError() error {
	select {
	case <-s.broken:
		return s.brokenErr
	default:
		return nil
	}
}

// logger routes pebble's messages to slog: its informational chatter at
// debug level, errors at error level, and a fatal error to Store.fatal.
type logger struct{ s *Store }

func (logger) Infof(format string, args ...any) {
	slog.Debug("pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (logger) Errorf(format string, args ...any) {
	slog.Error("store: pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (l logger) Fatalf(format string, args ...any) {
	msg := "store: pebble fatal: " + strings.TrimSpace(fmt.Sprintf(format, args...))
	slog.Error(msg)
	if l.s != nil && l.s.fatal(errors.New(msg)) {
		select {} // pebble expects Fatalf not to return; see Store.fatal
	}
	panic(msg) // pebble expects Fatalf not to return
}
