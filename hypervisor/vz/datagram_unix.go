//go:build unix

package vz

import (
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/capsem/capsem/hypervisor"
)

// Socket buffer sizes of both ends of DatagramPair. The framework asks for
// SO_RCVBUF at least twice SO_SNDBUF, four times for best throughput; on
// macOS SO_SNDBUF is also the largest datagram a unix socket takes (2 KiB
// by default, too small for a 1514-byte frame plus headroom, far too small
// for a 64 KiB MTU). Linux halves nothing but caps both at
// net.core.{w,r}mem_max without an error.
const (
	dgramSndBuf = 1 << 20
	dgramRcvBuf = 4 << 20
)

// DatagramPair returns a connected AF_UNIX SOCK_DGRAM pair for the NIC:
// one Ethernet frame per datagram, no length prefix. host is for this
// process — wrap it with netstack.NewDatagramConn (it is a *net.UnixConn) —
// and vm goes to Config.NIC, which the backend attaches with the
// framework's file-handle network attachment (that attachment refuses a
// stream socket, so hypervisor.SocketPair does not do here). Both are
// close-on-exec.
func DatagramPair() (host net.Conn, vm *os.File, err error) {
	return hypervisor.UnixPair(syscall.SOCK_DGRAM, "datagram socketpair", setDgramBuffers)
}

func setDgramBuffers(fd int) error {
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, dgramSndBuf); err != nil {
		return fmt.Errorf("datagram socketpair: SO_SNDBUF %d: %w", dgramSndBuf, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, dgramRcvBuf); err != nil {
		return fmt.Errorf("datagram socketpair: SO_RCVBUF %d: %w (raise kern.ipc.maxsockbuf)", dgramRcvBuf, err)
	}
	return nil
}
