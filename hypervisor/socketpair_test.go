//go:build unix

package hypervisor

import (
	"io"
	"net"
	"testing"
)

func TestSocketPair(t *testing.T) {
	host, vm, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	c, err := net.FileConn(vm)
	vm.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte("ping"))
	b := make([]byte, 4)
	if _, err := io.ReadFull(host, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q, %v", b, err)
	}
}
