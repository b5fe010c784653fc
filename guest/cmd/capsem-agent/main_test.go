//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/agent"
	"github.com/capsem/capsem/guest/boot"
	"github.com/capsem/capsem/guest/proto"
)

// TestMain lets the test binary be capsem-agent itself, for the tests that
// run it as a process.
func TestMain(m *testing.M) {
	if os.Getenv("CAPSEM_AGENT_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"capsem-agent"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func agentCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{"CAPSEM_AGENT_TEST_AS_MAIN=1", "CAPSEM_LEAK=from-the-agent"}
	return cmd
}

type pipeConn struct {
	io.Reader
	io.WriteCloser
}

func (p pipeConn) Close() error { return p.WriteCloser.Close() }

func TestServeStdioProcess(t *testing.T) {
	ws := t.TempDir()
	cmd := agentCmd(t, "serve", "--stdio", "--boot", filepath.Join(t.TempDir(), "none.json"), "--workspace", ws)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []proto.FileEvent
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := proto.NewClient(ctx, pipeConn{out, in}, proto.ClientOptions{Host: "test", OnEvent: func(m proto.Message) {
		if ev, ok := m.(proto.FileEvent); ok {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatalf("%v\nagent stderr: %s", err, stderr.String())
	}
	if cl.Hello().Agent != "dev" || cl.Ready().Uptime <= 0 {
		t.Fatalf("hello %+v ready %+v", cl.Hello(), cl.Ready())
	}
	s, err := cl.Exec(ctx, proto.Exec{Argv: []string{"sh", "-c", "pwd; env; echo data > made.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(s.Stdout())
	exit, err := s.Wait()
	if err != nil || exit.Code != 0 {
		t.Fatalf("%+v %v", exit, err)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if lines[0] != ws {
		t.Fatalf("working directory %q, want the workspace %q", lines[0], ws)
	}
	if strings.Contains(string(got), "CAPSEM_LEAK") || strings.Contains(string(got), "CAPSEM_AGENT_TEST") {
		t.Fatalf("the agent's environment leaked into the command:\n%s", got)
	}
	mu.Lock()
	if len(events) != 1 || events[0].Path != "made.txt" || events[0].Action != proto.ActionCreated {
		t.Errorf("file events %+v", events)
	}
	mu.Unlock()
	if err := cl.Shutdown("test"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent exited with %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("agent did not exit after Shutdown")
	}
}

func TestServeHangUpExitsZero(t *testing.T) {
	cmd := agentCmd(t, "serve", "--stdio", "--boot", "/nonexistent.json")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cl, err := proto.NewClient(context.Background(), pipeConn{out, in}, proto.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after hang-up: %v", err)
	}
}

func TestUsage(t *testing.T) {
	out, err := agentCmd(t).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "usage") {
		t.Fatalf("%v %s", err, out)
	}
	out, err = agentCmd(t, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "capsem-agent dev" {
		t.Fatalf("%v %s", err, out)
	}
	out, err = agentCmd(t, "serve", "--port", "/nonexistent/port").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "control") {
		t.Fatalf("missing port: %v %s", err, out)
	}
	if _, err := agentCmd(t, "serve", "--bogus").CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("bad flag: %v", err)
	}
}

func TestSetupInstallsTheHostsCA(t *testing.T) {
	root := t.TempDir()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 3, 1, 2, 3}}))
	bi := bootInfo{Root: root, Workspace: t.TempDir(), Ready: proto.Ready{Addr: "198.18.0.2/24", Warnings: []string{"boot warning"}}}
	a, b := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- serve(context.Background(), a, nil, bi, slog.New(slog.DiscardHandler)) }()
	// Time far off: an unmanaged server (not PID 1's) must not touch the clock.
	cl, err := proto.NewClient(context.Background(), b, proto.ClientOptions{CA: ca, Time: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if time.Since(time.Unix(1, 0)) < time.Hour {
		t.Fatal("the clock was set by an unmanaged agent")
	}
	r := cl.Ready()
	if r.Addr != "198.18.0.2/24" || len(r.Warnings) != 1 || len(r.CAFiles) < 2 || r.CAFiles[0] != boot.CAFile {
		t.Fatalf("ready %+v", r)
	}
	if got, _ := os.ReadFile(filepath.Join(root, boot.CABundle)); !strings.Contains(string(got), "BEGIN CERTIFICATE") {
		t.Fatalf("bundle %q", got)
	}
	s, err := cl.Exec(context.Background(), proto.Exec{Argv: []string{"sh", "-c", "echo $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(s.Stdout())
	want := strings.Join([]string{boot.CABundle, boot.CAFile, boot.CABundle, boot.CABundle}, " ") + "\n"
	if string(out) != want {
		t.Fatalf("CA environment %q, want %q", out, want)
	}
	// A CA that is not a certificate fails the setup, and the host hears why.
	a, b = net.Pipe()
	go func() { served <- serve(context.Background(), a, nil, bi, slog.New(slog.DiscardHandler)) }()
	if _, err := proto.NewClient(context.Background(), b, proto.ClientOptions{CA: "junk"}); err == nil || !strings.Contains(err.Error(), "PEM") {
		t.Fatalf("junk CA: %v", err)
	}
}

func TestBootInfoRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "boot.json")
	in := bootInfo{Managed: true, Port: "capsem.control", Vsock: 1024, Workspace: "/workspace", Root: "/",
		WSMount: &mountSpec{Source: "workspace", Target: "/workspace", FSType: "9p", Flags: 6, Data: boot.NineP}, WSDefer: true,
		CAEnv: boot.CAEnv(), Ready: proto.Ready{Addr: "198.18.0.2/24", Modules: []string{"virtio_net"}, Lockdown: []string{"kernel.modules_disabled=1"}}}
	facts, err := writeBootInfo(p, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := readBootInfo(p)
	if err != nil || out.Port != in.Port || out.Vsock != 1024 || !out.Managed || out.Ready.Addr != in.Ready.Addr || len(out.CAEnv) != 4 ||
		out.WSMount == nil || *out.WSMount != *in.WSMount || !out.WSDefer {
		t.Fatalf("%+v %v", out, err)
	}
	os.WriteFile(p, []byte("{"), 0o644)
	if _, err := readBootInfo(p); err == nil {
		t.Fatal("garbage accepted")
	}

	// The pipe PID 1 hands the facts over: what was written, read at close;
	// nothing written (a failed boot) is an error.
	r, w, _ := os.Pipe()
	go func(w *os.File) { w.Write(facts); w.Close() }(w) // w is reassigned below
	if out, err := readBootInfoFrom(r); err != nil || out.Ready.Addr != in.Ready.Addr || out.Vsock != 1024 {
		t.Fatalf("from the pipe: %+v %v", out, err)
	}
	r, w, _ = os.Pipe()
	w.Close()
	if _, err := readBootInfoFrom(r); err == nil || !strings.Contains(err.Error(), "boot failed") {
		t.Fatalf("an empty pipe: %v", err)
	}
}

var _ = agent.DefaultShell

// isMounted says whether path is a mount point in this mount namespace.
func isMounted(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// The server takes the workspace PID 1 mounted (or deferred) down for a
// snapshot and puts it back, with the mount boot used: a tmpfs here,
// 9p or virtio-fs in a guest.
func TestServeFreezeThawWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	for _, c := range []struct {
		name     string
		deferred bool
		why      string
	}{
		{"mounted at boot", false, "Freeze unmounts what boot mounted, Thaw mounts it again"},
		{"deferred", true, "capsem.wsdefer=1: nothing to unmount; the first Thaw mounts it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "workspace")
			spec := &mountSpec{Source: "tmpfs", Target: ws, FSType: "tmpfs", Data: "mode=0755"}
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if !c.deferred {
				if err := unix.Mount(spec.Source, ws, spec.FSType, 0, spec.Data); err != nil {
					t.Skipf("mount a tmpfs: %v", err)
				}
			}
			t.Cleanup(func() {
				for isMounted(t, ws) {
					if unix.Unmount(ws, unix.MNT_DETACH) != nil {
						return
					}
				}
			})
			bi := bootInfo{Workspace: ws, WSMount: spec, WSDefer: c.deferred}
			a, b := net.Pipe()
			go func() { _ = serve(context.Background(), a, nil, bi, slog.New(slog.DiscardHandler)) }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl, err := proto.NewClient(ctx, b, proto.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if fr, err := cl.Freeze(ctx, "test"); err != nil {
				t.Fatalf("freeze: %+v %v (%s)", fr, err, c.why)
			}
			if isMounted(t, ws) {
				t.Fatalf("%s still mounted after Freeze (%s)", ws, c.why)
			}
			th, err := cl.Thaw(ctx, proto.Thaw{})
			if err != nil || th.Workspace != ws || th.WSFS != "tmpfs" {
				t.Fatalf("thaw: %+v %v (%s)", th, err, c.why)
			}
			if !isMounted(t, ws) {
				t.Fatalf("%s not mounted after Thaw (%s)", ws, c.why)
			}
			// Its default directory is the workspace, mounted.
			s, err := cl.Exec(ctx, proto.Exec{Argv: []string{"sh", "-c", "stat -f -c %T ."}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(s.Stdout())
			if strings.TrimSpace(string(out)) != "tmpfs" {
				t.Fatalf("a command's directory is on %q, want the workspace's tmpfs", out)
			}
		})
	}
}

// A real unmount of a busy workspace fails (EBUSY): the freeze is refused,
// naming the holder, and the workspace stays mounted.
func TestServeFreezeBusyWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	spec := &mountSpec{Source: "tmpfs", Target: ws, FSType: "tmpfs", Data: "mode=0755"}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(spec.Source, ws, spec.FSType, 0, spec.Data); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ws, unix.MNT_DETACH) })
	holder := exec.Command("sleep", "600")
	holder.Dir = ws
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()

	a, b := net.Pipe()
	go func() {
		_ = serve(context.Background(), a, nil, bootInfo{Workspace: ws, WSMount: spec}, slog.New(slog.DiscardHandler))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := proto.NewClient(ctx, b, proto.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fr, err := cl.Freeze(ctx, "test")
	want := fmt.Sprintf("%d sleep (cwd)", holder.Process.Pid)
	if !errors.Is(err, proto.ErrBusy) || !strings.Contains(err.Error(), "busy") || len(fr.Holders) != 1 || fr.Holders[0] != want {
		t.Fatalf("freeze of a busy workspace: %+v %v, want holder %q", fr, err, want)
	}
	if !isMounted(t, ws) {
		t.Fatal("the workspace was unmounted by a refused freeze")
	}
	if _, err := cl.Ping(ctx); err != nil {
		t.Fatalf("the agent after a refused freeze: %v", err)
	}
}
