//go:build unix

package vz

import (
	"bytes"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func frame(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestDatagramPairKeepsFrameBoundaries(t *testing.T) {
	host, vm, err := DatagramPair()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	defer vm.Close()
	if _, ok := host.(*net.UnixConn); !ok {
		t.Fatalf("host is a %T, want *net.UnixConn (netstack.NewDatagramConn takes it)", host)
	}
	rc, err := vm.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var soType int
	var gerr error
	if err := rc.Control(func(fd uintptr) { soType, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TYPE) }); err != nil || gerr != nil {
		t.Fatalf("SO_TYPE: %v %v", err, gerr)
	}
	if soType != syscall.SOCK_DGRAM {
		t.Fatalf("vm end is socket type %d, want SOCK_DGRAM", soType)
	}
	_ = host.SetDeadline(time.Now().Add(10 * time.Second))

	// Sizes around the usual MTUs, several in flight at once: each read
	// must return exactly one whole frame.
	sizes := []int{60, 1514, 1, 9014, 4000, 65535 + 14 - 4096}
	t.Run("vm to host", func(t *testing.T) {
		for i, n := range sizes {
			if w, err := vm.Write(frame(n, byte(i))); err != nil || w != n {
				t.Fatalf("vm write %d: %d, %v", n, w, err)
			}
		}
		buf := make([]byte, 1<<17)
		for i, n := range sizes {
			r, err := host.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:r], frame(n, byte(i))) {
				t.Fatalf("frame %d: read %d bytes, want the %d-byte frame", i, r, n)
			}
		}
	})
	t.Run("host to vm", func(t *testing.T) {
		for i, n := range sizes {
			if w, err := host.Write(frame(n, byte(100+i))); err != nil || w != n {
				t.Fatalf("host write %d: %d, %v", n, w, err)
			}
		}
		buf := make([]byte, 1<<17)
		for i, n := range sizes {
			r, err := vm.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:r], frame(n, byte(100+i))) {
				t.Fatalf("frame %d: read %d bytes, want the %d-byte frame", i, r, n)
			}
		}
	})
}

func TestDatagramPairCloseOnExec(t *testing.T) {
	host, vm, err := DatagramPair()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	defer vm.Close()
	check := func(name string, rc syscall.RawConn) {
		t.Helper()
		var flags int
		var ferr error
		if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFD, 0) }); err != nil || ferr != nil {
			t.Fatalf("%s: fcntl: %v %v", name, err, ferr)
		}
		if flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s end is not close-on-exec", name)
		}
	}
	rc, _ := vm.SyscallConn()
	check("vm", rc)
	hrc, _ := host.(*net.UnixConn).SyscallConn()
	check("host", hrc)
}
