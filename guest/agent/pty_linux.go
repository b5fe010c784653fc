package agent

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/internal/fdctl"
)

// openPTY allocates a pseudo-terminal: the master through /dev/ptmx,
// unlocked with TIOCSPTLCK, and the slave through TIOCGPTPEER (Linux 4.13+,
// immune to a /dev/pts path race) or else by its number (TIOCGPTN). The
// master is non-blocking so the Go poller serves it (deadlines work, Close
// unblocks a Read); the slave is blocking, as the child expects.
func openPTY() (master, slave *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(err error) (*os.File, *os.File, error) {
		unix.Close(m)
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fail(fmt.Errorf("unlock pty (TIOCSPTLCK): %w", err))
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		return fail(fmt.Errorf("pty number (TIOCGPTN): %w", err))
	}
	name := "/dev/pts/" + strconv.Itoa(int(n))
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		fd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", name, err))
		}
		s = uintptr(fd)
	}
	return os.NewFile(uintptr(m), "/dev/ptmx"), os.NewFile(s, name), nil
}

// setWinsize sets the terminal size; the kernel sends SIGWINCH to the
// foreground process group when it changes.
func setWinsize(f *os.File, rows, cols uint16) error {
	if rows == 0 {
		rows = 24
	}
	if cols == 0 {
		cols = 80
	}
	return fdctl.Control(f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

// foregroundPgrp returns the terminal's foreground process group.
func foregroundPgrp(f *os.File) (int, error) {
	var pg int
	err := fdctl.Control(f, func(fd int) error {
		var err error
		pg, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pg, err
}

// eofChar returns the terminal's EOF character (VEOF, normally ^D).
func eofChar(f *os.File) byte {
	c := byte(4)
	_ = fdctl.Control(f, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err == nil && t.Cc[unix.VEOF] != 0 {
			c = t.Cc[unix.VEOF]
		}
		return err
	})
	return c
}
