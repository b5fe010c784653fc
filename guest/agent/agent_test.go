//go:build linux

package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// harness runs Serve over one end of a connection and a proto.Client over
// the other, in this process.
type harness struct {
	t      *testing.T
	cl     *proto.Client
	served chan error

	mu     sync.Mutex
	events []proto.Message
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	return newHarnessConn(t, cfg, false)
}

func newHarnessConn(t *testing.T, cfg Config, socketpair bool) *harness {
	t.Helper()
	var a, b io.ReadWriteCloser
	if socketpair {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Non-blocking, so the Go poller serves them and Close interrupts
		// a blocked Read, as it must for Serve and Client to end.
		unix.SetNonblock(fds[0], true)
		unix.SetNonblock(fds[1], true)
		a, b = os.NewFile(uintptr(fds[0]), "agent"), os.NewFile(uintptr(fds[1]), "host")
	} else {
		a, b = net.Pipe()
	}
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 300 * time.Millisecond
	}
	h := &harness{t: t, served: make(chan error, 1)}
	go func() { h.served <- Serve(context.Background(), a, cfg) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := proto.NewClient(ctx, b, proto.ClientOptions{Host: "test-host", OnEvent: func(m proto.Message) {
		h.mu.Lock()
		h.events = append(h.events, m)
		h.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.cl = cl
	t.Cleanup(func() {
		cl.Close()
		select {
		case <-h.served:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after the connection closed")
		}
	})
	return h
}

func (h *harness) takeEvents() []proto.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := h.events
	h.events = nil
	return ev
}

type result struct {
	stdout, stderr string
	exit           proto.Exit
	err            error
}

// run runs ex with stdin and collects everything.
func (h *harness) run(ex proto.Exec, stdin []byte) result {
	h.t.Helper()
	s, err := h.cl.Exec(context.Background(), ex)
	if err != nil {
		return result{err: err}
	}
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&out, s.Stdout()) }()
	go func() { defer wg.Done(); io.Copy(&errb, s.Stderr()) }()
	if stdin != nil {
		if _, err := s.Write(stdin); err != nil {
			h.t.Errorf("stdin: %v", err)
		}
	}
	if err := s.CloseStdin(); err != nil {
		h.t.Errorf("close stdin: %v", err)
	}
	exit, err := waitTimeout(h.t, s, 30*time.Second)
	wg.Wait()
	return result{out.String(), errb.String(), exit, err}
}

func waitTimeout(t *testing.T, s *proto.Session, d time.Duration) (proto.Exit, error) {
	t.Helper()
	select {
	case <-s.Done():
		return s.Wait()
	case <-time.After(d):
		t.Fatalf("session %d did not end within %v", s.ID(), d)
		return proto.Exit{}, nil
	}
}

func TestEcho(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.run(proto.Exec{Argv: []string{"echo", "hi"}}, nil)
	if r.err != nil || r.stdout != "hi\n" || r.stderr != "" || r.exit.Code != 0 || r.exit.Signal != "" {
		t.Fatalf("%+v", r)
	}
	if h.cl.Hello().Agent != "test" || h.cl.Hello().Kernel == "" || h.cl.Hello().Window != proto.DefaultWindow {
		t.Fatalf("hello %+v", h.cl.Hello())
	}
	if d, err := h.cl.Ping(context.Background()); err != nil || d <= 0 {
		t.Fatalf("ping %v %v", d, err)
	}
}

func TestSocketpair(t *testing.T) {
	h := newHarnessConn(t, Config{}, true)
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "echo over a socketpair"}}, nil)
	if r.err != nil || r.stdout != "over a socketpair\n" {
		t.Fatalf("%+v", r)
	}
}

func TestExitCode(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "exit 42"}}, nil)
	if r.err != nil || r.exit.Code != 42 {
		t.Fatalf("%+v", r)
	}
}

func TestStdoutStderrSeparate(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "echo out; echo err >&2; echo out2; echo err2 >&2"}}, nil)
	if r.err != nil || r.stdout != "out\nout2\n" || r.stderr != "err\nerr2\n" {
		t.Fatalf("%+v", r)
	}
}

func TestStdinRoundTrip(t *testing.T) {
	h := newHarness(t, Config{StdinWindow: 64 << 10})
	in := make([]byte, 3<<20) // many stdin windows
	rand.Read(in)
	r := h.run(proto.Exec{Argv: []string{"cat"}}, in)
	if r.err != nil || r.exit.Code != 0 || r.stdout != string(in) {
		t.Fatalf("cat: err %v exit %+v, %d bytes out of %d", r.err, r.exit, len(r.stdout), len(in))
	}
	// A command that closes its stdin does not block the host: what it
	// does not read is discarded and the credit returned.
	r = h.run(proto.Exec{Argv: []string{"sh", "-c", "exec 0<&-; sleep 0.5; echo done"}}, make([]byte, 4<<20))
	if r.err != nil || r.exit.Code != 0 || r.stdout != "done\n" {
		t.Fatalf("stdin closed by the command: %+v", r)
	}
}

// ptyReader collects a pty session's output and waits for patterns in it.
type ptyReader struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{}
}

func readPTY(s *proto.Session) *ptyReader {
	p := &ptyReader{ch: make(chan struct{}, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := s.Stdout().Read(b)
			p.mu.Lock()
			p.buf.Write(b[:n])
			p.mu.Unlock()
			select {
			case p.ch <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *ptyReader) waitFor(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		s := p.buf.String()
		p.mu.Unlock()
		if m := re.FindString(s); m != "" {
			return m
		}
		select {
		case <-p.ch:
		case <-deadline:
			t.Fatalf("waiting for %v in pty output %q", re, s)
		}
	}
}

func TestPTYTty(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.run(proto.Exec{Argv: []string{"tty"}, TTY: true}, nil)
	if r.err != nil || r.exit.Code != 0 || !regexp.MustCompile(`^/dev/pts/[0-9]+\r\n$`).MatchString(r.stdout) || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
}

func TestPTYResize(t *testing.T) {
	h := newHarness(t, Config{})
	s, err := h.cl.Exec(context.Background(), proto.Exec{
		Argv: []string{"sh", "-c", "stty size; read x; stty size"}, TTY: true, Rows: 33, Cols: 91,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := readPTY(s)
	p.waitFor(t, regexp.MustCompile(`33 91`))
	if err := s.Resize(50, 132); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, regexp.MustCompile(`50 132`))
	if exit, err := waitTimeout(t, s, 10*time.Second); err != nil || exit.Code != 0 {
		t.Fatalf("%+v %v", exit, err)
	}
}

func TestPTYCtrlC(t *testing.T) {
	h := newHarness(t, Config{})
	s, err := h.cl.Exec(context.Background(), proto.Exec{Argv: []string{"sleep", "100"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, s.Stdout())
	if _, err := s.Write([]byte{0x03}); err != nil {
		t.Fatal(err)
	}
	exit, err := waitTimeout(t, s, 10*time.Second)
	if err != nil || exit.Signal != "INT" || exit.Code != 130 {
		t.Fatalf("^C: %+v %v", exit, err)
	}
}

// In a shell on a pty, ^C reaches the foreground job, not the shell, and
// stdin EOF (^D) ends the shell.
func TestPTYShellJob(t *testing.T) {
	h := newHarness(t, Config{})
	s, err := h.cl.Exec(context.Background(), proto.Exec{Argv: []string{"sh", "-i"}, TTY: true, Env: []string{"PS1=$ "}})
	if err != nil {
		t.Fatal(err)
	}
	p := readPTY(s)
	p.waitFor(t, regexp.MustCompile(`\$ $`))
	s.Write([]byte("sleep 100\n"))
	time.Sleep(300 * time.Millisecond) // let the shell start the job
	s.Write([]byte{0x03})
	s.Write([]byte("echo after=$?\n"))
	p.waitFor(t, regexp.MustCompile(`after=130`))
	if err := s.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	exit, err := waitTimeout(t, s, 10*time.Second)
	if err != nil || exit.Code != 130 && exit.Code != 0 {
		t.Fatalf("shell exit after ^D: %+v %v", exit, err)
	}
}

func TestSignalTerm(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tty := range []bool{false, true} {
		s, err := h.cl.Exec(context.Background(), proto.Exec{Argv: []string{"sleep", "100"}, TTY: tty})
		if err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, s.Stdout())
		if err := s.Signal("TERM"); err != nil {
			t.Fatal(err)
		}
		exit, err := waitTimeout(t, s, 10*time.Second)
		if err != nil || exit.Signal != "TERM" || exit.Code != 143 {
			t.Fatalf("tty=%v: %+v %v", tty, exit, err)
		}
	}
	// The signal reaches the whole process group, not only the shell.
	s, err := h.cl.Exec(context.Background(), proto.Exec{Argv: []string{"sh", "-c", "sleep 100; echo survived"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&out, s.Stdout()); close(done) }()
	time.Sleep(200 * time.Millisecond)
	s.Signal("KILL")
	if exit, _ := waitTimeout(t, s, 10*time.Second); exit.Signal != "KILL" {
		t.Fatalf("%+v", exit)
	}
	<-done
	if out.Len() != 0 {
		t.Fatalf("output after KILL: %q", out.String())
	}
}

func TestLargeOutputBoundedMemory(t *testing.T) {
	h := newHarness(t, Config{})
	const size = 50 << 20
	s, err := h.cl.Exec(context.Background(), proto.Exec{Argv: []string{"head", "-c", "52428800", "/dev/zero"}})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	var pmu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			pmu.Lock()
			peak = max(peak, m.HeapAlloc)
			pmu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	// The host does not read for a while: the command must block, not the
	// agent buffer.
	time.Sleep(500 * time.Millisecond)
	n, err := io.Copy(io.Discard, s.Stdout())
	close(stop)
	<-sampled
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	exit, err := waitTimeout(t, s, 30*time.Second)
	if err != nil || exit.Code != 0 {
		t.Fatalf("%+v %v", exit, err)
	}
	growth := int64(peak) - int64(base)
	t.Logf("50 MiB streamed; heap %d KiB before, peak %d KiB", base>>10, peak>>10)
	if growth > 16<<20 {
		t.Fatalf("heap grew by %d MiB while streaming 50 MiB: output is being buffered", growth>>20)
	}
}

func TestConcurrentSessions(t *testing.T) {
	h := newHarness(t, Config{})
	a, err := h.cl.Exec(context.Background(), proto.Exec{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	var aout bytes.Buffer
	adone := make(chan struct{})
	go func() { io.Copy(&aout, a.Stdout()); close(adone) }()
	a.Write([]byte("first "))
	// B runs to completion while A is still open.
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "echo b; exit 7"}}, nil)
	if r.err != nil || r.stdout != "b\n" || r.exit.Code != 7 {
		t.Fatalf("b: %+v", r)
	}
	a.Write([]byte("second"))
	a.CloseStdin()
	exit, err := waitTimeout(t, a, 10*time.Second)
	<-adone
	if err != nil || exit.Code != 0 || aout.String() != "first second" {
		t.Fatalf("a: %+v %v %q", exit, err, aout.String())
	}
	if a.ID() == 0 || a.ID() == r.exit.ID {
		t.Fatal("session ids")
	}
}

func TestEnvOnlyWhatWasSent(t *testing.T) {
	t.Setenv("CAPSEM_AGENT_LEAK", "must-not-appear")
	h := newHarness(t, Config{Shell: "/bin/sh"})
	r := h.run(proto.Exec{Argv: []string{"env"}, Env: []string{"FOO=bar", "TERM=dumb"}}, nil)
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("%+v", r)
	}
	got := strings.Split(strings.TrimSpace(r.stdout), "\n")
	sort.Strings(got)
	want := []string{"FOO=bar", "HOME=/root", "PATH=" + DefaultPath, "PWD=/", "SHELL=/bin/sh", "TERM=dumb"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("env = %q, want %q", got, want)
	}
	if env := h.cl.Ready().Env; len(env) != 3 {
		t.Fatalf("ready env %q", env)
	}
	// The host can replace a default.
	r = h.run(proto.Exec{Argv: []string{"sh", "-c", "echo $HOME"}, Env: []string{"HOME=/home/agent"}}, nil)
	if r.stdout != "/home/agent\n" {
		t.Fatalf("HOME override: %q", r.stdout)
	}
}

func TestSetupAndReady(t *testing.T) {
	var gotHost proto.Hello
	h := newHarness(t, Config{
		Env: []string{"PATH=/usr/bin:/bin"},
		Setup: func(ctx context.Context, host proto.Hello) (proto.Ready, error) {
			gotHost = host
			return proto.Ready{Addr: "198.18.0.2/24", Env: []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}}, nil
		},
	})
	if gotHost.Host != "test-host" || gotHost.Time == 0 {
		t.Fatalf("setup saw %+v", gotHost)
	}
	ready := h.cl.Ready()
	if ready.Addr != "198.18.0.2/24" || strings.Join(ready.Env, " ") != "PATH=/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" {
		t.Fatalf("ready %+v", ready)
	}
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "echo $SSL_CERT_FILE"}}, nil)
	if r.stdout != "/etc/ssl/certs/ca-certificates.crt\n" {
		t.Fatalf("%+v", r)
	}

	// A failing setup is reported to the host.
	a, b := net.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- Serve(context.Background(), a, Config{Setup: func(context.Context, proto.Hello) (proto.Ready, error) {
			return proto.Ready{}, errors.New("no root filesystem")
		}})
	}()
	if _, err := proto.NewClient(context.Background(), b, proto.ClientOptions{}); err == nil || !strings.Contains(err.Error(), "no root filesystem") {
		t.Fatalf("client saw %v", err)
	}
	if err := <-served; err == nil {
		t.Fatal("Serve succeeded with a failing setup")
	}
}

func TestExecErrors(t *testing.T) {
	h := newHarness(t, Config{})
	notExec := t.TempDir() + "/data"
	os.WriteFile(notExec, []byte("x"), 0o644)
	var perr proto.Error
	for _, c := range []struct {
		ex   proto.Exec
		code int
		msg  string
	}{
		{proto.Exec{Argv: []string{"no-such-command-xyz"}}, 127, "not found"},
		{proto.Exec{Argv: []string{notExec}}, 126, "not an executable"},
		{proto.Exec{Argv: []string{"true"}, Dir: "/nonexistent"}, 126, "working directory"},
		{proto.Exec{Argv: []string{"true"}, Env: []string{"NOEQUALS"}}, 126, "KEY=value"},
	} {
		r := h.run(c.ex, nil)
		if !errors.As(r.err, &perr) || perr.Code != c.code || !strings.Contains(perr.Msg, c.msg) {
			t.Errorf("%v: %v", c.ex.Argv, r.err)
		}
	}
	// Empty argv runs the shell.
	r := h.run(proto.Exec{}, []byte("echo from-shell\n"))
	if r.err != nil || r.stdout != "from-shell\n" {
		t.Fatalf("default shell: %+v", r)
	}
	// Working directory.
	dir := t.TempDir()
	r = h.run(proto.Exec{Argv: []string{"pwd"}, Dir: dir}, nil)
	if r.stdout != dir+"\n" {
		t.Fatalf("pwd %q", r.stdout)
	}
}

func TestBackgroundHolderDoesNotHang(t *testing.T) {
	h := newHarness(t, Config{DrainTimeout: 200 * time.Millisecond})
	start := time.Now()
	s, err := h.cl.Exec(context.Background(), proto.Exec{Argv: []string{"sh", "-c", "sleep 30 & echo started"}})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Kill(-s.PID(), unix.SIGKILL)
	out, _ := io.ReadAll(s.Stdout())
	exit, err := waitTimeout(t, s, 10*time.Second)
	if err != nil || exit.Code != 0 || string(out) != "started\n" {
		t.Fatalf("%+v %v %q", exit, err, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestShutdownAndClose(t *testing.T) {
	a, b := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- Serve(context.Background(), a, Config{}) }()
	cl, err := proto.NewClient(context.Background(), b, proto.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Exec(context.Background(), proto.Exec{Argv: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if err := cl.Shutdown("test"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, ErrShutdown) {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	// The running command was killed (and reaped by its session).
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Fatalf("sleep %d still exists after shutdown: %v", pid, err)
	}
	<-cl.Done()

	// The host hanging up ends Serve with EOF.
	a, b = net.Pipe()
	go func() { served <- Serve(context.Background(), a, Config{}) }()
	cl, err = proto.NewClient(context.Background(), b, proto.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := <-served; !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Serve after hang-up: %v", err)
	}
}

func TestFileEventsThroughAgent(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, Config{WatchDir: dir, Dir: dir, WatchDelay: 50 * time.Millisecond})
	sh := func(script string) {
		t.Helper()
		r := h.run(proto.Exec{Argv: []string{"sh", "-c", script}}, nil)
		if r.err != nil || r.exit.Code != 0 {
			t.Fatalf("%s: %+v", script, r)
		}
	}
	sh("echo hello > new.txt; mkdir sub; echo x > sub/inner.txt")
	expectEvents(t, h.takeEvents(), []string{"created new.txt 6", "created sub dir", "created sub/inner.txt 2"})
	sh("echo more >> new.txt")
	expectEvents(t, h.takeEvents(), []string{"modified new.txt 11"})
	sh("mv sub/inner.txt sub/renamed.txt")
	expectEvents(t, h.takeEvents(), []string{"renamed sub/renamed.txt 2 from sub/inner.txt"})
	sh("rm new.txt")
	expectEvents(t, h.takeEvents(), []string{"deleted new.txt"})
}

// expectEvents checks that the FileEvents among msgs are exactly want (in
// order), written as "action path [size] [dir] [from old]"; other
// messages (ExecEvents) are skipped.
func expectEvents(t *testing.T, msgs []proto.Message, want []string) {
	t.Helper()
	var got []string
	for _, m := range msgs {
		if ev, ok := m.(proto.FileEvent); ok {
			got = append(got, describe(ev))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("file events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func describe(ev proto.FileEvent) string {
	s := ev.Action + " " + ev.Path
	if ev.Dir {
		s += " dir"
	} else if ev.Action != proto.ActionDeleted {
		s += " " + strconv.FormatInt(ev.Size, 10)
	}
	if ev.OldPath != "" {
		s += " from " + ev.OldPath
	}
	return s
}

func TestExecEvents(t *testing.T) {
	h := newHarness(t, Config{})
	h.run(proto.Exec{Argv: []string{"sh", "-c", "exit 3"}}, nil)
	var evs []proto.ExecEvent
	for _, m := range h.takeEvents() {
		if e, ok := m.(proto.ExecEvent); ok {
			evs = append(evs, e)
		}
	}
	if len(evs) != 1 || evs[0].ExitCode != 3 || strings.Join(evs[0].Argv, " ") != "sh -c exit 3" || evs[0].PID == 0 || evs[0].Duration <= 0 || evs[0].Start == 0 {
		t.Fatalf("exec events %+v", evs)
	}
}

// The agent runs its commands with nothing of its own: not even its
// environment when the host sends none.
func TestNoAgentEnvWhenNothingSent(t *testing.T) {
	t.Setenv("CAPSEM_AGENT_LEAK", "x")
	h := newHarness(t, Config{Env: []string{"PATH=/usr/bin:/bin"}})
	r := h.run(proto.Exec{Argv: []string{"env"}}, nil)
	// PWD is the command's working directory (the harness's default "/"),
	// as a shell would set it.
	if strings.TrimSpace(r.stdout) != "PATH=/usr/bin:/bin\nPWD=/" {
		t.Fatalf("env %q", r.stdout)
	}
}
