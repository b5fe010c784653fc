package peerbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
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
