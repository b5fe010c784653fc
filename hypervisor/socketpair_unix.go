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
	// SOCK_CLOEXEC is not portable (darwin); hold ForkLock so no child
	// forked meanwhile inherits the fds.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	hf := os.NewFile(uintptr(fds[0]), "host")
	vm = os.NewFile(uintptr(fds[1]), "vm")
	host, err = net.FileConn(hf)
	hf.Close()
	if err != nil {
		vm.Close()
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return host, vm, nil
}
