// Package fdctl runs a system call on an open file's descriptor for the
// guest's PID 1 (guest/boot: the control port's raw mode) and its agent
// (guest/agent: a pty's size, foreground group and EOF character).
//
// It must never switch a descriptor to blocking mode, which os.File.Fd
// does: the Go poller would then no longer serve the file, so deadlines
// would stop working and Close would no longer unblock a Read.
package fdctl
