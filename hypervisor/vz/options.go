package vz

import (
	"log/slog"
	"time"
)

// DefaultControlPort is the vsock port the guest agent listens on and the
// host connects to (capsem.vsock=DefaultControlPort).
const DefaultControlPort uint32 = 1024

// DefaultStopGrace is how long Stop waits for the guest to power off after
// asking it to before it stops the VM by force.
const DefaultStopGrace = 2 * time.Second

// Options tune the backend; the zero value is right for capsem.
type Options struct {
	// ControlPort is the guest agent's vsock port (default
	// DefaultControlPort).
	ControlPort uint32
	// MTU of the NIC's file-handle attachment: 0 or 1500 leaves the
	// framework's default (1500); up to 65535 needs macOS 13. The guest
	// must be told the same (capsem.mtu=N), and netstack too.
	MTU int
	// StopGrace bounds how long Stop waits, after asking the guest to
	// stop, before stopping the VM by force (default DefaultStopGrace;
	// negative: only Stop's context bounds it). A capsem guest powers off
	// when asked over the control channel; the framework's request goes to
	// a virtual power button a bare PID 1 may not watch.
	StopGrace time.Duration
	// Logger gets the backend's decisions at debug (default
	// slog.Default()).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.ControlPort == 0 {
		o.ControlPort = DefaultControlPort
	}
	if o.StopGrace == 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}
