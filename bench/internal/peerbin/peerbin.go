package peerbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/capsem/capsem/tests/harness"
)

// GvproxyModule is the gvproxy every bench measures: one pin, so that
// netbench's and soakbench's figures are of the same build.
const GvproxyModule = "github.com/containers/gvisor-tap-vsock/cmd/gvproxy@v0.8.9"

// GvproxyGuestMAC is the MAC gvproxy gives its DHCP lease to: a TAP with any
// other gets no lease.
const GvproxyGuestMAC = "5a:94:ef:e4:0c:ee"

// BuildCapsemNet builds ./cmd/capsem-net into bin. It must run from the
// repository root.
func BuildCapsemNet(bin string) error {
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/capsem-net").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/capsem-net (run from the repository root): %v: %s", err, out)
	}
	return nil
}

// Gvproxy returns the path of GvproxyModule's binary in cache, installing it
// there first when it is missing.
func Gvproxy(cache string) (string, error) {
	bin := filepath.Join(cache, "gvproxy")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.Command("go", "install", GvproxyModule)
	cmd.Env = append(os.Environ(), "GOBIN="+cache, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %v: %s", GvproxyModule, err, out)
	}
	return bin, nil
}

// Passt returns the path of the system's passt.
func Passt() (string, error) {
	bin, err := exec.LookPath("passt")
	if err != nil {
		return "", errors.New("passt not installed (apt-get install passt)")
	}
	return bin, nil
}

// Start runs bin with args, its output kept, and returns how to stop it:
// an interrupt, then a kill after 5 s.
func Start(bin string, args ...string) (stop func(), err error) {
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	return func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}, nil
}

// Guest is a namespace whose TAP is pumped to a peer's QEMU-framed socket,
// configured by the peer's DHCP.
type Guest struct {
	NS    *harness.Namespace
	Lease harness.Lease
	pump  *harness.Pump
}

// AttachGuest makes a namespace with the guest link's mtu, gives its TAP
// mac when set (gvproxy leases by MAC), connects it to the peer's socket
// and takes a DHCP lease.
func AttachGuest(sock string, mtu int, mac string) (*Guest, error) {
	ns, err := harness.NewNamespace(mtu)
	if err != nil {
		return nil, err
	}
	g := &Guest{NS: ns}
	if mac != "" {
		if err := ns.IP("link", "set", "tap0", "address", mac); err != nil {
			g.Close()
			return nil, err
		}
	}
	conn, err := harness.DialQEMU(sock, 10*time.Second)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.pump = harness.StartPump(ns.TAP, conn)
	if g.Lease, err = ns.DHCP(); err != nil {
		g.Close()
		return nil, fmt.Errorf("dhcp: %w", err)
	}
	return g, nil
}

// Close stops the pump and removes the namespace.
func (g *Guest) Close() {
	if g.pump != nil {
		g.pump.Close()
	}
	g.NS.Close()
}
