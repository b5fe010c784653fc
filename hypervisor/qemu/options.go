package qemu

import "log/slog"

// Options tune the backend; the zero value is right for capsem.
type Options struct {
	// Binary is the QEMU executable (default: qemu-system-x86_64 from PATH).
	Binary string
	// Accel forces "kvm" or "tcg"; "" probes (see probeAccel).
	Accel string
	// Logger gets the accelerator decision and QEMU's stderr at debug
	// (default slog.Default()).
	Logger *slog.Logger
}
