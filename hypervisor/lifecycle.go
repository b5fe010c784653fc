package hypervisor

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Lifecycle is the state a backend's VM keeps from Start to its end, and
// the rules both backends follow: the first cause of a forced end (a boot
// timeout, Start's context) wins unless Stop came first; Wait reports nil
// after a power-off or a Stop, that cause after a forced end, and the
// backend's own account otherwise. A backend embeds it (NewLifecycle) and
// calls CheckStart, Started, Exit, RecordCause and BeginStop; Control,
// Done, Booted and Wait are then the VM's.
type Lifecycle struct {
	name string // the backend, for errors: "qemu", "vz"

	mu       sync.Mutex
	started  bool
	stopping bool
	cause    error // why the VM was ended by force, set before it is
	waitErr  error
	control  io.ReadWriteCloser // the host end of the control channel, from Started

	done     chan struct{} // closed when the VM has ended and waitErr is set
	booted   chan struct{} // closed on the guest's first control byte
	bootOnce sync.Once
}

// NewLifecycle returns the lifecycle of a VM of the backend name.
func NewLifecycle(name string) *Lifecycle {
	return &Lifecycle{name: name, done: make(chan struct{}), booted: make(chan struct{})}
}

// Booted is closed when the guest has written its first byte to the
// control channel.
func (l *Lifecycle) Booted() <-chan struct{} { return l.booted }

// MarkBooted closes Booted (once).
func (l *Lifecycle) MarkBooted() { l.bootOnce.Do(func() { close(l.booted) }) }

// Done is closed when the VM has ended.
func (l *Lifecycle) Done() <-chan struct{} { return l.done }

// IsStarted reports whether Started was called.
func (l *Lifecycle) IsStarted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// CheckStart is Start's first step: an error if the VM was started
// before, ctx's error if it is done already.
func (l *Lifecycle) CheckStart(ctx context.Context) error {
	if l.IsStarted() {
		return errors.New(l.name + ": VM already started")
	}
	return ctx.Err()
}

// Started records that the VM runs, with the host end of its control
// channel: Control, Wait and Stop act from now on.
func (l *Lifecycle) Started(control io.ReadWriteCloser) {
	l.mu.Lock()
	l.started = true
	l.control = control
	l.mu.Unlock()
}

// Control is the host end of the control channel (nil before Start).
func (l *Lifecycle) Control() io.ReadWriteCloser {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.control
}

// Exit records how the VM ended — err is the backend's own account, nil
// for a power-off — runs cleanup, then closes Done. A cause recorded
// before wins over err; after BeginStop the end is clean.
func (l *Lifecycle) Exit(err error, cleanup func()) {
	l.mu.Lock()
	switch {
	case l.cause != nil:
		err = l.cause
	case l.stopping:
		err = nil
	}
	l.waitErr = err
	l.mu.Unlock()
	if cleanup != nil {
		cleanup()
	}
	close(l.done)
}

// ended reports whether Done is closed.
func (l *Lifecycle) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// RecordCause records why the VM is about to be ended by force (the first
// cause wins, and none after BeginStop). It reports whether the VM still
// runs, that is whether the caller should end it.
func (l *Lifecycle) RecordCause(cause error) bool {
	l.mu.Lock()
	if l.cause == nil && !l.stopping {
		l.cause = cause
	}
	l.mu.Unlock()
	return !l.ended()
}

// BeginStop records that Stop ends the VM (a clean end, unless a cause was
// recorded first). It reports whether the VM runs, that is whether the
// caller should stop it.
func (l *Lifecycle) BeginStop() bool {
	l.mu.Lock()
	if !l.started {
		l.mu.Unlock()
		return false
	}
	if l.cause == nil {
		l.stopping = true
	}
	l.mu.Unlock()
	return !l.ended()
}

// Wait blocks until the VM has ended and returns Exit's account of it.
func (l *Lifecycle) Wait() error {
	if !l.IsStarted() {
		return errors.New(l.name + ": VM not started")
	}
	<-l.done
	return l.waitErr
}

// WatchBoot calls timeout unless the guest boots (Booted) or the VM ends
// within t.
func (l *Lifecycle) WatchBoot(t time.Duration, timeout func()) {
	timer := time.NewTimer(t)
	defer timer.Stop()
	select {
	case <-l.booted:
	case <-l.done:
	case <-timer.C:
		timeout()
	}
}

// OnCancel calls f if ctx ends before the VM does.
func (l *Lifecycle) OnCancel(ctx context.Context, f func()) {
	select {
	case <-ctx.Done():
		f()
	case <-l.done:
	}
}
