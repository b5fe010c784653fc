//go:build unix

package hypervisor

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// SocketPair returns a connected SOCK_STREAM pair: host for this process
// (wrap it with netstack.NewStreamConn, or use it as a control stream) and
// vm for the backend (Config.NIC). Both are close-on-exec; the backend
// passes vm to the hypervisor explicitly.
func SocketPair() (host net.Conn, vm *os.File, err error) {
	return UnixPair(syscall.SOCK_STREAM, "socketpair", nil)
}

// UnixPair returns a connected AF_UNIX pair of sotype (syscall.SOCK_STREAM
// or SOCK_DGRAM): host for this process, vm for the backend, both
// close-on-exec. tune, when not nil, is called on both descriptors before
// they are wrapped (a backend's socket buffer sizes) and its error is
// returned as it is; what begins the other errors ("socketpair").
func UnixPair(sotype int, what string, tune func(fd int) error) (host net.Conn, vm *os.File, err error) {
	// SOCK_CLOEXEC is not portable (darwin); hold ForkLock so no child
	// forked meanwhile inherits the fds.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, sotype, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if tune != nil {
		for _, fd := range fds {
			if err := tune(fd); err != nil {
				syscall.Close(fds[0])
				syscall.Close(fds[1])
				return nil, nil, err
			}
		}
	}
	hf := os.NewFile(uintptr(fds[0]), "host")
	vm = os.NewFile(uintptr(fds[1]), "vm")
	host, err = net.FileConn(hf)
	hf.Close()
	if err != nil {
		vm.Close()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return host, vm, nil
}
