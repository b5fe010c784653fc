package tests

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/gvisor-tap-vsock/pkg/client"
	"github.com/containers/gvisor-tap-vsock/pkg/types"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/tests/harness"
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

	hp := refusedPort(t)
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

// capsem-net's --forward-sock, as podman machine uses gvproxy's: a host
// socket whose connections reach a socket in the guest over SSH to the
// guest's real sshd, carried in by the netstack and recorded.
func TestCapsemNetForwardSock(t *testing.T) {
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/sshd"); err2 != nil {
			t.Skip("no sshd (apt-get install openssh-server, or go tool task deps)")
		}
		sshd = "/usr/sbin/sshd"
	}
	dir := t.TempDir()
	for _, k := range []string{"host_key", "id"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "id.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("Port 22\nListenAddress 0.0.0.0\nHostKey %[1]s/host_key\nAuthorizedKeysFile %[1]s/authorized_keys\n"+
		"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"+
		"PidFile none\nAllowStreamLocalForwarding yes\nClientAliveInterval 1\nClientAliveCountMax 2\n", dir) // the session ends 3 s after the namespace is gone
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // sshd's privilege-separation directory
		t.Fatal(err)
	}

	// The guest's socket: what podman's API socket is in its machine.
	guestSock := filepath.Join(dir, "guest.sock")
	gl, err := net.Listen("unix", guestSock)
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 256)
				n, _ := c.Read(buf)
				_, _ = c.Write(append([]byte("guest-sock:"), buf[:n]...))
			}()
		}
	}()

	hostSock := filepath.Join(dir, "host.sock")
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	e := startEnv(t, "[network]\nallow = []\n", envOptions{extraArgs: []string{
		"-forward-sock", hostSock, "-forward-dest", guestSock, "-forward-user", user, "-forward-identity", filepath.Join(dir, "id")}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := e.ns.Command(ctx, sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	sshdLog := &harness.SyncBuffer{}
	srv.Stdout, srv.Stderr = sshdLog, sshdLog
	srv.WaitDelay = 2 * time.Second // a session child of sshd may hold the pipes a moment longer
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = srv.Wait() }()

	ask := func(msg string) (string, error) {
		c, err := net.DialTimeout("unix", hostSock, 5*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	var got string
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err = ask("hi")
		if err == nil && got != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond) // sshd starting in the namespace
	}
	if got != "guest-sock:hi" {
		t.Fatalf("through --forward-sock: %q %v\nsshd:\n%s\ncapsem-net:\n%s", got, err, sshdLog.String(), e.out.String())
	}
	if got, err := ask("again"); got != "guest-sock:again" {
		t.Fatalf("a second connection: %q %v", got, err)
	}
	evs := e.stop() // the SSH flow ends with capsem-net and is recorded
	if n := netEvent(evs, func(n *store.Net) bool {
		return n.Direction == store.Inbound && n.Port == 22 && n.Reason == "published" && strings.HasPrefix(n.MatchedRule, "forward-sock ")
	}); n == nil {
		t.Error("no inbound flow to the guest's port 22 recorded for the forward")
	}
}

// Inbound connections count against the flow cap like the guest's own:
// with --max-flows 1 and one connection through an exposed port held
// open, the next is refused (reset) and recorded inbound, flow-cap.
func TestInboundFlowCap(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "services.sock")
	e := startEnv(t, "[network]\nallow = []\n", envOptions{extraArgs: []string{"--services", "unix://" + sock, "--max-flows", "1"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := e.ns.Command(ctx, "python3", "-c", `
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen(8)
held = []
while True:
    c, _ = s.accept(); c.sendall(b"hello\n"); held.append(c)
`)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = srv.Wait() }()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	local := fmt.Sprintf("127.0.0.1:%d", refusedPort(t))
	if err := client.New(hc, "http://gvproxy").Expose(&types.ExposeRequest{Local: local, Remote: "192.168.127.2:7000", Protocol: types.TCP}); err != nil {
		t.Fatal(err)
	}
	greet := func() (string, error) {
		c, err := net.DialTimeout("tcp", local, 5*time.Second)
		if err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 16)
		n, err := c.Read(buf)
		if err != nil {
			c.Close()
			return "", err
		}
		t.Cleanup(func() { c.Close() })
		return string(buf[:n]), nil
	}
	var first string
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if first, err = greet(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if first != "hello\n" {
		t.Fatalf("the first connection: %q %v", first, err)
	}
	if got, err := greet(); err == nil {
		t.Fatalf("a second connection over --max-flows 1 was carried: %q", got)
	}
	evs := e.stop()
	if n := netEvent(evs, func(n *store.Net) bool {
		return n.Direction == store.Inbound && n.Reason == "flow-cap" && n.Decision == store.Denied
	}); n == nil {
		t.Error("no inbound flow-cap event recorded")
	}
}
