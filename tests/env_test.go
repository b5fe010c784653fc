package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/tests/harness"
)

// capsemNetBin and capsemBin are the binaries under test, built once by
// TestMain.
var capsemNetBin, capsemBin string

// sharedCADir is the interception CA the capsem run, doctor and sandbox
// tests share unless they need their own: an installation has one CA, and
// the boot snapshot a run restores is made once per CA (sandbox.BootKey).
var sharedCADir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capsem-tests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	capsemNetBin = filepath.Join(dir, "capsem-net")
	capsemBin = filepath.Join(dir, "capsem")
	sharedCADir = filepath.Join(dir, "ca")
	args := []string{"build", "-o", dir}
	if os.Getenv("CAPSEM_TEST_RACE") != "" {
		args = append(args, "-race") // run the binaries under the race detector
	}
	build := exec.Command("go", append(args, "../cmd/capsem-net", "../cmd/capsem")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building capsem-net and capsem:", err)
		os.Exit(1)
	}
	// The guest agent, next to capsem where `capsem run` looks for it: static
	// (it is the guest's /init), so never with cgo or -race.
	build = exec.Command("go", "build", "-o", dir, "../guest/cmd/capsem-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building capsem-agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// guestTools are the programs the namespace tests run as the guest.
var guestTools = []string{"dig", "python3", "ping", "curl", "openssl"}

func needHarness(t *testing.T) {
	t.Helper()
	if why := harness.Requirements(guestTools...); why != "" {
		t.Skip("namespace harness unavailable: " + why)
	}
}

// env is one guest namespace wired to one capsem-net process.
type env struct {
	t          *testing.T
	ns         *harness.Namespace
	pump       *harness.Pump
	cmd        *exec.Cmd
	out        *harness.SyncBuffer
	dataDir    string
	policyPath string
	caCert     string // the capsem CA certificate the guest trusts
	lease      harness.Lease
	stopped    bool
	events     []store.Event
}

type envOptions struct {
	mtu       int
	transport string // "qemu" (default), "bess", "vfkit", "fd"
	dropEvery int    // qemu: the pump loses every dropEvery-th data frame to the guest (0: none)
	extraArgs []string
}

// startEnv writes policy, starts capsem-net on a fresh socket, creates the
// namespace, pumps its TAP to the socket and configures it by DHCP.
func startEnv(t *testing.T, policy string, opt envOptions) *env {
	t.Helper()
	needHarness(t)
	if opt.mtu == 0 {
		opt.mtu = 1500
	}
	dir := t.TempDir()
	e := &env{t: t, out: &harness.SyncBuffer{}, dataDir: filepath.Join(dir, "data"), policyPath: filepath.Join(dir, "policy.toml")}
	if err := os.WriteFile(e.policyPath, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "net.sock")
	e.caCert = filepath.Join(dir, "ca", "ca.pem")
	args := []string{"--policy", e.policyPath, "--data", e.dataDir, "--mtu", fmt.Sprint(opt.mtu), "--ca-dir", filepath.Dir(e.caCert)}
	var fdPeer *os.File
	switch opt.transport {
	case "", "qemu":
		args = append(args, "--listen-qemu", "unix://"+sock)
	case "bess":
		args = append(args, "--listen-bess", "unixpacket://"+sock)
	case "vfkit":
		args = append(args, "--listen-vfkit", "unixgram://"+sock)
	case "fd":
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fdPeer = os.NewFile(uintptr(fds[0]), "pump-end")
		child := os.NewFile(uintptr(fds[1]), "capsem-end")
		defer child.Close()
		e.cmd = exec.Command(capsemNetBin)
		e.cmd.ExtraFiles = []*os.File{child}
		args = append(args, "--listen-fd", "3")
	}
	args = append(args, opt.extraArgs...)
	if e.cmd == nil {
		e.cmd = exec.Command(capsemNetBin)
	}
	e.cmd.Args = append([]string{capsemNetBin}, args...)
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !e.stopped {
			e.cmd.Process.Kill()
			e.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("capsem-net output:\n%s", e.out.String())
		}
	})

	ns, err := harness.NewNamespace(opt.mtu)
	if err != nil {
		t.Fatal(err)
	}
	e.ns = ns
	t.Cleanup(func() { ns.Close() })

	switch opt.transport {
	case "", "qemu":
		c, err := harness.DialQEMU(sock, 10*time.Second)
		if err != nil {
			t.Fatalf("%v\ncapsem-net output:\n%s", err, e.out.String())
		}
		e.pump = harness.StartLossyPump(ns.TAP, c, opt.dropEvery)
	case "bess":
		c, err := harness.DialBESS(sock, 10*time.Second)
		if err != nil {
			t.Fatalf("%v\ncapsem-net output:\n%s", err, e.out.String())
		}
		e.pump = harness.StartPump(ns.TAP, c)
	case "vfkit":
		c, err := harness.DialVfkit(sock, 10*time.Second)
		if err != nil {
			t.Fatalf("%v\ncapsem-net output:\n%s", err, e.out.String())
		}
		e.pump = harness.StartPump(ns.TAP, c)
	case "fd":
		c, err := net.FileConn(fdPeer)
		fdPeer.Close()
		if err != nil {
			t.Fatal(err)
		}
		e.pump = harness.StartPump(ns.TAP, netstack.NewStreamConn(c))
	}
	t.Cleanup(func() { e.pump.Close() })

	lease, err := ns.DHCP()
	if err != nil {
		t.Fatalf("DHCP: %v\ncapsem-net output:\n%s", err, e.out.String())
	}
	e.lease = lease
	return e
}

// run runs a guest command and returns its output and error.
func (e *env) run(timeout time.Duration, name string, args ...string) (string, error) {
	return e.ns.Run(timeout, name, args...)
}

// runEnv runs a guest command with extra environment variables.
func (e *env) runEnv(timeout time.Duration, vars []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := e.ns.Command(ctx, name, args...)
	cmd.Env = append(os.Environ(), vars...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return out.String(), err
}

// trustEnv is how a guest trusts the capsem CA: the ordinary variables.
func (e *env) trustEnv() []string {
	return []string{
		"SSL_CERT_FILE=" + e.caCert,
		"REQUESTS_CA_BUNDLE=" + e.caCert,
		"NODE_EXTRA_CA_CERTS=" + e.caCert,
		"CURL_CA_BUNDLE=" + e.caCert,
	}
}

// mustRun runs a guest command that must succeed.
func (e *env) mustRun(timeout time.Duration, name string, args ...string) string {
	e.t.Helper()
	out, err := e.run(timeout, name, args...)
	if err != nil {
		e.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// python runs a python3 program in the guest.
func (e *env) python(timeout time.Duration, prog string, args ...string) (string, error) {
	return e.run(timeout, "python3", append([]string{"-c", prog}, args...)...)
}

// signal sends sig to capsem-net.
func (e *env) signal(sig os.Signal) {
	e.t.Helper()
	if err := e.cmd.Process.Signal(sig); err != nil {
		e.t.Fatal(err)
	}
}

// stop sends SIGTERM, checks capsem-net exits 0, and returns the events of
// its session, read back from the store on disk.
func (e *env) stop() []store.Event {
	e.t.Helper()
	if e.stopped {
		return e.events
	}
	e.signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case err := <-done:
		e.stopped = true
		if err != nil {
			e.t.Fatalf("capsem-net did not exit cleanly on SIGTERM: %v\n%s", err, e.out.String())
		}
	case <-time.After(20 * time.Second):
		e.t.Fatalf("capsem-net did not exit within 20s of SIGTERM\n%s", e.out.String())
	}
	e.events = readEvents(e.t, e.dataDir)
	return e.events
}

func readEvents(t *testing.T, dataDir string) []store.Event {
	t.Helper()
	st, err := store.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sessions, err := st.Sessions()
	if err != nil || len(sessions) != 1 {
		t.Fatalf("want 1 session in the store, got %d (%v)", len(sessions), err)
	}
	if sessions[0].EndedAt.IsZero() {
		t.Errorf("session %s has no end time: events were not flushed on SIGTERM", sessions[0].ID)
	}
	var evs []store.Event
	if err := st.Events(sessions[0].ID, func(ev store.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// netEvent returns the first net event matching all of the given fields
// that are set in want (zero fields are ignored).
func netEvent(evs []store.Event, match func(*store.Net) bool) *store.Net {
	for _, ev := range evs {
		if ev.Net != nil && match(ev.Net) {
			return ev.Net
		}
	}
	return nil
}

func dnsEvent(evs []store.Event, match func(*store.DNS) bool) *store.DNS {
	for _, ev := range evs {
		if ev.DNS != nil && match(ev.DNS) {
			return ev.DNS
		}
	}
	return nil
}

func dumpEvents(evs []store.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		switch {
		case ev.Net != nil:
			n := ev.Net
			fmt.Fprintf(&b, "  #%d net %s %s %s:%d domain=%q reason=%s rule=%q sent=%d recv=%d count=%d %s\n",
				ev.Seq, n.Decision, n.Transport, n.IP, n.Port, n.Domain, n.Reason, n.MatchedRule, n.BytesSent, n.BytesReceived, n.Count, n.Detail)
		case ev.DNS != nil:
			d := ev.DNS
			fmt.Fprintf(&b, "  #%d dns %s %s %s via %s/%s answer=%s reason=%s\n",
				ev.Seq, d.Decision, d.QName, d.QType, d.ResolverAsked, d.Transport, d.Answer, d.Reason)
		default:
			fmt.Fprintf(&b, "  #%d %s\n", ev.Seq, ev.Kind)
		}
	}
	return b.String()
}

// echoServer is an upstream on host loopback that echoes what it gets and
// remembers the SHA-256 of every stream it received.
type echoServer struct {
	ln     net.Listener
	mu     sync.Mutex
	hashes []string
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *echoServer) serve(c net.Conn) {
	defer c.Close()
	h := sha256.New()
	io.Copy(c, io.TeeReader(c, h))
	c.(*net.TCPConn).CloseWrite()
	s.mu.Lock()
	s.hashes = append(s.hashes, hex.EncodeToString(h.Sum(nil)))
	s.mu.Unlock()
}

func (s *echoServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *echoServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hashes...)
}
