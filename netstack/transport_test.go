package netstack

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenRefusesALiveSocketButReplacesAStaleOne(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	l1, err := Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix://" + path); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second listener on a live socket: %v, want an in-use error", err)
	}
	l1.Close()
	// A socket file nobody listens on any more is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	l2, err := Listen("unix://" + path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, nil, 0o644)
	if _, err := Listen("unix://" + regular); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("listening over a regular file: %v", err)
	}
	for _, bad := range []string{"unix://relative.sock", "tcp:///x", "unix:///"} {
		if _, err := Listen(bad); err == nil {
			t.Errorf("Listen(%q) succeeded", bad)
		}
	}
}
