package tests

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/gvisor-tap-vsock/pkg/client"
	"github.com/containers/gvisor-tap-vsock/pkg/types"

	"github.com/capsem/capsem/store"
)

// capsem-net as a drop-in for gvproxy's port forwarder: the real client
// package of gvisor-tap-vsock (what podman machine and crc use) exposes a
// port of a web server in the guest namespace through -services, lists
// it, reaches the server through it, and unexposes it; what capsem-net
// does not serve is refused with why; the flow is recorded inbound.
func TestCapsemNetServices(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "services.sock")
	e := startEnv(t, "[network]\nallow = []\n", envOptions{extraArgs: []string{"-services", "unix://" + sock}})

	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte("served in the guest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := e.ns.Command(ctx, "python3", "-m", "http.server", "8000", "--bind", "0.0.0.0", "--directory", root)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = srv.Wait() }()

	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the services socket: %v %v, want mode 0600", fi, err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	cl := client.New(hc, "http://gvproxy")

	hp := freePort(t)
	local := fmt.Sprintf("127.0.0.1:%d", hp)
	if err := cl.Expose(&types.ExposeRequest{Local: local, Remote: "192.168.127.2:8000", Protocol: types.TCP}); err != nil {
		t.Fatalf("expose: %v", err)
	}
	list, err := cl.List()
	if err != nil || len(list) != 1 || list[0].Local != local || list[0].Remote != "192.168.127.2:8000" || list[0].Protocol != types.TCP {
		t.Fatalf("list: %+v %v", list, err)
	}
	body := ""
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + local + "/index.html")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET through the exposed port: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if body != "served in the guest\n" {
		t.Fatalf("through the exposed port: %q", body)
	}

	// What capsem-net does not forward is refused, saying so.
	if err := cl.Expose(&types.ExposeRequest{Local: "127.0.0.1:0", Remote: "192.168.127.2:53", Protocol: types.UDP}); err == nil || !strings.Contains(err.Error(), "TCP ports only") {
		t.Errorf("a UDP expose: %v", err)
	}
	if err := cl.Expose(&types.ExposeRequest{Local: local, Remote: "192.168.127.2:8000", Protocol: types.TCP}); err == nil {
		t.Error("the same local address exposed twice")
	}
	if _, err := cl.ListDNS(); err == nil {
		t.Error("the DNS zones API, which capsem-net does not serve, answered")
	}

	if err := cl.Unexpose(&types.UnexposeRequest{Local: local, Protocol: types.TCP}); err != nil {
		t.Fatalf("unexpose: %v", err)
	}
	if c, err := net.DialTimeout("tcp", local, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("the port still listens after unexpose")
	}
	if list, err := cl.List(); err != nil || len(list) != 0 {
		t.Errorf("list after unexpose: %+v %v", list, err)
	}

	evs := e.stop()
	if n := netEvent(evs, func(n *store.Net) bool {
		return n.Direction == store.Inbound && n.Reason == "published" && n.Port == 8000 && n.BytesSent > 0
	}); n == nil {
		t.Error("no inbound flow to port 8000 recorded")
	}
}
