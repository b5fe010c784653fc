package hypervisor

import (
	"context"
	"errors"
	"net"
	"testing"
)

func TestLifecycleWaitResult(t *testing.T) {
	boom, timeout, later := errors.New("exit status 1"), errors.New("boot timeout"), errors.New("ctx")
	for _, c := range []struct {
		name  string
		steps func(l *Lifecycle)
		exit  error
		want  error
		why   string
	}{
		{"power-off", func(*Lifecycle) {}, nil, nil, "the guest powered off: a clean end"},
		{"crash", func(*Lifecycle) {}, boom, boom, "the backend's own account when nothing else is known"},
		{"stopped", func(l *Lifecycle) { l.BeginStop() }, boom, nil, "Stop ended it: the kill's exit status is not an error"},
		{"killed", func(l *Lifecycle) { l.RecordCause(timeout) }, boom, timeout, "a forced end reports why, not the exit status"},
		{"first cause", func(l *Lifecycle) { l.RecordCause(timeout); l.RecordCause(later) }, boom, timeout, "the first cause wins"},
		{"cause then stop", func(l *Lifecycle) { l.RecordCause(timeout); l.BeginStop() }, nil, timeout, "a Stop after a kill does not hide the kill"},
		{"stop then cause", func(l *Lifecycle) { l.BeginStop(); l.RecordCause(timeout) }, nil, nil, "a kill during Stop is Stop's"},
	} {
		l := NewLifecycle("test")
		l.Started(nil)
		c.steps(l)
		cleaned := false
		l.Exit(c.exit, func() { cleaned = true })
		if err := l.Wait(); err != c.want {
			t.Errorf("%s: Wait() = %v, want %v: %s", c.name, err, c.want, c.why)
		}
		if !cleaned {
			t.Errorf("%s: cleanup not run before Done", c.name)
		}
		if l.RecordCause(later) || l.BeginStop() {
			t.Errorf("%s: an ended VM is reported as running", c.name)
		}
	}
	if err := NewLifecycle("test").Wait(); err == nil {
		t.Error("Wait before Start returned nil")
	}
	if NewLifecycle("test").BeginStop() {
		t.Error("BeginStop before Start asks to stop a VM that never ran")
	}
}

func TestLifecycleStart(t *testing.T) {
	l := NewLifecycle("test")
	if l.Control() != nil {
		t.Error("a control channel before Start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.CheckStart(ctx); err != nil {
		t.Errorf("CheckStart of a new VM: %v", err)
	}
	cancel()
	if err := l.CheckStart(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("CheckStart with a done context = %v, want its error: nothing may start", err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	l.Started(a)
	if l.Control() != a {
		t.Error("Control is not the channel Started recorded")
	}
	if err := l.CheckStart(context.Background()); err == nil || err.Error() != "test: VM already started" {
		t.Errorf("CheckStart of a started VM = %v, want \"test: VM already started\": a VM starts once", err)
	}
}
