package home

// The lock protocol. The file lock (empty, 0600) is flock'd exclusively by
// the sandbox's supervisor for its whole life; the kernel drops the lock
// however the process dies, so:
//
//	held                        running
//	free, run.json left behind  crashed (the supervisor died without stopping)
//	free, crash non-empty       crashed (the supervisor saw its guest die)
//	free, neither               stopped
//
// A reader tests the lock with a shared, non-blocking flock that it drops
// at once; only a supervisor takes it (Lock), never a reader.

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Locked says whether a supervisor holds the sandbox's lock.
func (d Dir) Locked() bool {
	f, err := os.Open(d.LockPath())
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// WaitUnlocked waits, looking every 50 ms, until no supervisor holds the
// sandbox's lock (true) or timeout has passed with one holding it (false).
func (d Dir) WaitUnlocked(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for d.Locked() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// Lock takes the sandbox's lock for a supervisor, for as long as the
// returned file stays open (the kernel drops it when the process dies,
// however it dies). A lock held by another is an AlreadyRunningError.
func (d Dir) Lock() (*os.File, error) {
	f, err := os.OpenFile(d.LockPath(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, AlreadyRunningError{d.Name}
		}
		return nil, fmt.Errorf("lock %s: %w", d.LockPath(), err)
	}
	return f, nil
}

// AwaitCrashedExit waits, at most max, while a supervisor that has
// recorded its guest's crash still holds the lock: it is on its way out
// (closing the store, removing its socket), and ls already shows the
// sandbox crashed, so a start right then must not be told it is running —
// a start that followed a guest's death at once met that window.
func (d Dir) AwaitCrashedExit(max time.Duration) {
	deadline := time.Now().Add(max)
	for d.Locked() && time.Now().Before(deadline) {
		if b, err := os.ReadFile(d.CrashPath()); err != nil || len(b) == 0 {
			return // running, not crashed
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AlreadyRunningError is a start of a sandbox whose lock another
// supervisor holds.
type AlreadyRunningError struct{ Name string }

func (e AlreadyRunningError) Error() string {
	return fmt.Sprintf("sandbox %q is already running (capsem exec %s -- CMD runs a command in it; capsem stop %s stops it)", e.Name, e.Name, e.Name)
}
