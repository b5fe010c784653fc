package agent

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// Freeze and Thaw: a snapshot of the guest (QEMU migration to a file).
//
// Freeze quiesces what a snapshot cannot carry. The watcher goes first,
// its pending events flushed to the host: it pins every workspace
// directory with a descriptor, which would keep the workspace from being
// unmounted. Then sync(2), then the workspace is unmounted: QEMU refuses
// to migrate while a 9p export is mounted. A busy workspace refuses the
// freeze: the watcher is started again and Frozen says who holds it.
// Otherwise Frozen is the last frame written: the connection holds every
// later send (proto.Conn.Hold), so that no frame is half-written when the
// guest is saved, and a restored guest owes its new host nothing of the
// old one's.
//
// The hold is on the Conn rather than the senders: the loop must go on
// reading (it waits for Thaw, and answers a refused Exec), so a send
// while frozen queues its frame whole and returns. What queues is bounded
// by the output credit the host gave before Freeze (it sends none while
// frozen) and by one answer per frame the host sends.

// freeze handles Freeze; only a broken connection is an error.
func (s *server) freeze(m proto.Freeze) error {
	s.log.Info("freeze", "reason", m.Reason)
	if s.frozen {
		return s.conn.Hold(context.Background(), proto.Frozen{})
	}
	s.stopWatcher()
	unix.Sync()
	if ws := s.cfg.Workspace; ws != nil && s.wsMounted {
		if err := ws.Unmount(); err != nil {
			fr := proto.Frozen{
				Refused: fmt.Sprintf("the workspace %s is in use (%v): end the processes holding it, or have them leave it, and snapshot again", ws.Path, err),
				Holders: Holders("/proc", ws.Path, os.Getpid()),
			}
			s.log.Warn("freeze refused", "err", err, "holders", fr.Holders)
			if err := s.startWatcher(ThawScanBudget); err != nil {
				s.log.Warn("no file events after a refused freeze", "err", err)
			}
			return s.conn.Send(fr)
		}
		s.wsMounted = false
	}
	s.setFrozen(true)
	return s.conn.Hold(context.Background(), proto.Frozen{})
}

// thaw handles Thaw, frozen or not; only a broken connection is an
// error, every failed step is a warning in Thawed.
func (s *server) thaw(m proto.Thaw) error {
	var th proto.Thawed
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		th.Warnings = append(th.Warnings, msg)
		s.log.Warn(msg)
	}
	if s.cfg.Reseed != nil {
		seed := m.Seed
		if len(seed) > proto.MaxSeed {
			seed = seed[:proto.MaxSeed]
		}
		switch {
		case len(seed) == 0:
			warn("no seed from the host: the random generator was not reseeded")
		case len(seed) < proto.MinSeed:
			warn("a seed of %d bytes from the host, fewer than %d: the random generator was reseeded with it all the same", len(seed), proto.MinSeed)
		}
		if len(seed) > 0 {
			if err := s.cfg.Reseed(seed); err != nil {
				warn("reseed the random generator: %v", err)
			}
		}
	}
	if s.cfg.SetClock != nil && m.Time != 0 {
		if err := s.cfg.SetClock(time.Unix(0, m.Time)); err != nil {
			warn("set the clock: %v", err)
		}
	}
	if m.Restored {
		// A new host: everything of the old one goes, before anything
		// is sent to the new one.
		if !s.frozen {
			if err := s.conn.Hold(context.Background(), nil); err != nil {
				return err
			}
		}
		n := s.dropSessions()
		frames := s.conn.Drop()
		s.log.Info("restored: the previous host's sessions and frames dropped", "sessions", n, "frames", frames)
	}
	if ws := s.cfg.Workspace; ws != nil && !s.wsMounted {
		if fstype, err := ws.Mount(); err != nil {
			warn("workspace: %v", err)
		} else {
			s.wsMounted = true
			th.Workspace, th.WSFS = ws.Path, fstype
		}
	}
	if s.watcher.Load() == nil {
		if err := s.startWatcher(ThawScanBudget); err != nil {
			warn("no file events: %v", err)
		}
	}
	s.setFrozen(false)
	th.Uptime = uptime()
	s.log.Info("thawed", "restored", m.Restored, "warnings", len(th.Warnings))
	return s.conn.Release(context.Background(), th)
}

// ThawScanBudget is the watcher's scan budget after a thaw, shorter than
// the boot's InitialScanBudget: a thaw is what a resume, a fork and every
// `capsem run` from the boot snapshot wait on, and the guest's processes
// run again meanwhile anyway. A few directories are listed before Thawed
// (on 9p under TCG ~5-15 ms each), a larger tree in the background,
// ending with the overflow on "." as at boot. Measured with this
// repository as the workspace (994 directories): the watcher's start in
// the thaw took 350-380 ms with InitialScanBudget, 130-170 ms with this
// one (a directory's listing is not cut short: the root's 24
// subdirectories are watched in one go), and the resume 670-700 ms →
// 460-490 ms; 410 ms with an empty workspace.
const ThawScanBudget = 50 * time.Millisecond

// startWatcher starts the watcher on cfg.WatchDir, unless there is none
// or the workspace is not mounted; budget is NewWatcher's.
func (s *server) startWatcher(budget time.Duration) error {
	if s.cfg.WatchDir == "" || (s.cfg.Workspace != nil && !s.wsMounted) || s.watcher.Load() != nil {
		return nil
	}
	w, err := NewWatcher(s.cfg.WatchDir, s.cfg.WatchDelay, budget, func(ev proto.FileEvent) {
		_ = s.conn.Send(ev)
	})
	if err != nil {
		return err
	}
	s.watcher.Store(w)
	return nil
}

// stopWatcher sends the watcher's pending events and stops it, closing
// every descriptor it holds under the workspace.
func (s *server) stopWatcher() {
	if w := s.watcher.Swap(nil); w != nil {
		w.Flush()
		w.Close()
	}
}

// dropSessions kills every session of the host before a restore and
// forgets it; nothing more of it is sent (its id may be reused at once).
func (s *server) dropSessions() int {
	s.mu.Lock()
	old := s.sessions
	s.sessions = map[uint32]*session{}
	s.mu.Unlock()
	for _, ss := range old {
		ss.orphan()
		ss.kill()
	}
	return len(old)
}

// uptime is the time since the guest's kernel started (CLOCK_BOOTTIME).
func uptime() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
