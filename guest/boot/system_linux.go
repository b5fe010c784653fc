package boot

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/internal/fdctl"
)

// moduleInitCompressedFile is finit_module's MODULE_INIT_COMPRESSED_FILE
// (Linux 5.17+): the kernel decompresses the file.
const moduleInitCompressedFile = 4

// LoadModules loads mods in order with finit_module. A module that is
// already there (built in, or loaded) is fine. It goes on after a failure
// and returns the names loaded and the failures joined.
func LoadModules(mods []Module) ([]string, error) {
	var loaded []string
	var errs []error
	for _, m := range mods {
		f, err := os.Open(m.Path)
		if err != nil {
			errs = append(errs, fmt.Errorf("module %s: %w", m.Name(), err))
			continue
		}
		flags := 0
		if m.Compressed() {
			flags = moduleInitCompressedFile
		}
		err = unix.FinitModule(int(f.Fd()), m.Params, flags)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("module %s: finit_module: %w", m.Name(), err))
			continue
		}
		loaded = append(loaded, m.Name())
	}
	return loaded, errors.Join(errs...)
}

// LoadModuleList reads the module list at path and loads it. A missing
// list means a kernel with everything built in: nothing to load.
func LoadModuleList(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	mods, err := ParseModuleList(data, dirOf(path))
	if err != nil {
		return nil, err
	}
	return LoadModules(mods)
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// SwapOff turns off every swap area (none is expected: the guest has no
// swap device, and the sandbox's memory must not reach a disk).
func SwapOff() ([]string, error) {
	data, err := os.ReadFile("/proc/swaps")
	if err != nil {
		return nil, err
	}
	var off []string
	for _, s := range ParseSwaps(data) {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			return off, err
		}
		if _, _, e := unix.Syscall(unix.SYS_SWAPOFF, uintptr(unsafe.Pointer(p)), 0, 0); e != 0 {
			return off, fmt.Errorf("swapoff %s: %w", s, e)
		}
		off = append(off, s)
	}
	return off, nil
}

// SetHostname sets the kernel's host name.
func SetHostname(name string) error {
	return unix.Sethostname([]byte(name))
}

// SetClock sets the wall clock to t if it is off by more than a second
// (the guest's RTC may be absent or wrong; TLS needs the right time).
func SetClock(t time.Time) (bool, error) {
	if t.IsZero() {
		return false, nil
	}
	d := time.Since(t)
	if d < time.Second && d > -time.Second {
		return false, nil
	}
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return false, fmt.Errorf("set clock: %w", err)
	}
	return true, nil
}

// Uptime is the time since the kernel started.
func Uptime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// Poweroff syncs and powers the machine off; where the machine has no
// power-off (no ACPI), it resets, which ends QEMU under -no-reboot. It does
// not return.
func Poweroff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	for {
		time.Sleep(time.Hour)
	}
}

// OpenPort opens the control channel's device. A virtio-serial port
// (virtserialport, /dev/vportNpM) is a plain byte stream; a console port
// (virtconsole, /dev/hvcN) is a tty and is switched to raw mode, or the line
// discipline would rewrite the binary frames.
func OpenPort(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open control port: %w", err)
	}
	if err := fdctl.Control(f, makeRawIfTTY); err != nil {
		f.Close()
		return nil, fmt.Errorf("control port %s: raw mode: %w", path, err)
	}
	return f, nil
}

func makeRawIfTTY(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil // not a tty
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	return unix.IoctlSetTermios(fd, unix.TCSETS, t)
}

// VsockListener listens on a vsock port for as long as the agent serves:
// the host of a guest restored from a snapshot connects again (the
// framework does not carry vsock connections across a save).
//
// Only the host's connections are taken (peer CID 2): with a loopback
// transport in the guest, a guest process could otherwise connect to the
// agent's port and take the channel of a frozen agent over from its host.
type VsockListener struct {
	f    *os.File
	port uint32
	peer uint32 // the CID accepted from: the host's; tests change it
}

// NewVsockListener listens on vsock port, any CID.
func NewVsockListener(port uint32) (*VsockListener, error) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("vsock: %w (are the vsock modules in the module list?)", err)
	}
	f := os.NewFile(uintptr(fd), "vsock-listen:"+strconv.Itoa(int(port)))
	if err := unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: port}); err != nil {
		f.Close()
		return nil, fmt.Errorf("vsock bind port %d: %w", port, err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		f.Close()
		return nil, fmt.Errorf("vsock listen: %w", err)
	}
	return &VsockListener{f: f, port: port, peer: unix.VMADDR_CID_HOST}, nil
}

// Accept waits for the next connection, for at most timeout (0: no
// limit), or until Close. The returned file is non-blocking, so Close
// interrupts a Read.
func (l *VsockListener) Accept(timeout time.Duration) (*os.File, error) {
	if timeout > 0 {
		_ = l.f.SetReadDeadline(time.Now().Add(timeout))
	} else {
		_ = l.f.SetReadDeadline(time.Time{})
	}
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	for {
		var nfd int
		var sa unix.Sockaddr
		var aerr error
		err = rc.Read(func(fd uintptr) bool {
			nfd, sa, aerr = unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
			return aerr != unix.EAGAIN
		})
		if err != nil {
			return nil, fmt.Errorf("vsock accept: %w", err)
		}
		if aerr != nil {
			return nil, fmt.Errorf("vsock accept: %w", aerr)
		}
		if vm, ok := sa.(*unix.SockaddrVM); !ok || vm.CID != l.peer {
			unix.Close(nfd)
			continue
		}
		return os.NewFile(uintptr(nfd), "vsock:"+strconv.Itoa(int(l.port))), nil
	}
}

// Close stops listening; a waiting Accept returns.
func (l *VsockListener) Close() error { return l.f.Close() }

// RaiseNofileLimit lifts the hard limit on open files to fs.nr_open (the
// watcher pins one descriptor per workspace directory) and leaves the soft
// limit at 1024: Go raises its own soft limit to the hard one, and restores
// 1024 for the commands it starts.
func RaiseNofileLimit() error {
	max := uint64(1 << 20)
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			max = n
		}
	}
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 1024, Max: max})
}
