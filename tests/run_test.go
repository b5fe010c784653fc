package tests

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/tests/harness"
)

// The `capsem run` tests boot the real default guest (the pinned Debian
// kernel, the initramfs with capsem-agent, the mmdebstrap root filesystem)
// under QEMU — TCG on these machines — with its NIC in capsem's netstack.

var (
	guestOnce sync.Once
	guestWhy  string // why the guest cannot be had here ("" when it can)
)

// needGuest skips the test when the default guest cannot be booted here,
// building the image first if it is not in the cache (CI builds it before
// the tests: `go tool task image`).
func needGuest(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the default guest is linux/amd64 under QEMU; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	guestOnce.Do(func() {
		if os.Geteuid() != 0 {
			guestWhy = "the VM tests run as root (they make network namespaces, users and workspaces owned by others); run the tests as root"
			return
		}
		for _, bin := range []string{"qemu-system-x86_64", "mmdebstrap", "mkfs.erofs", "npm"} {
			if _, err := exec.LookPath(bin); err != nil {
				guestWhy = bin + " not installed (go tool task deps installs it)"
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, capsemBin, "image", "build")
		out, err := cmd.CombinedOutput()
		if err != nil {
			guestWhy = fmt.Sprintf("FAIL: capsem image build: %v\n%s", err, out)
		}
	})
	if strings.HasPrefix(guestWhy, "FAIL: ") {
		t.Fatal(strings.TrimPrefix(guestWhy, "FAIL: "))
	}
	if guestWhy != "" {
		t.Skip("no guest: " + guestWhy)
	}
}

// runResult is one finished `capsem run`.
type runResult struct {
	stdout, stderr string
	code           int
	session        string
}

// runOpts configure capsemRun.
type runOpts struct {
	data, workspace, caDir, policy string
	env                            []string // the capsem process's own environment additions
	stdin                          io.Reader
	timeout                        time.Duration
	onStart                        func(pid int)     // called once capsem runs
	onLine                         func(line string) // called with each line of capsem's stderr as it comes
}

// capsemRun runs `capsem run [flags] -- argv…` and checks that it left no
// QEMU and no socket behind.
func capsemRun(t *testing.T, o runOpts, flags []string, argv ...string) runResult {
	t.Helper()
	if o.data == "" {
		o.data = t.TempDir()
	}
	if o.workspace == "" {
		o.workspace = t.TempDir()
	}
	if o.caDir == "" {
		o.caDir = sharedCADir
	}
	if o.timeout == 0 {
		o.timeout = 5 * time.Minute
	}
	args := []string{"run", "--data", o.data, "--workspace", o.workspace, "--ca-dir", o.caDir}
	if o.policy != "" {
		args = append(args, "--policy", o.policy)
	}
	args = append(append(append(args, flags...), "--"), argv...)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, capsemBin, args...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Stdin = o.stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if o.onLine != nil {
		cmd.Stderr = io.MultiWriter(&stderr, &lineWriter{fn: o.onLine})
	}
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		if o.onStart != nil {
			o.onStart(cmd.Process.Pid)
		}
		err = cmd.Wait()
	}
	r := runResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("capsem run %q: %v\nstderr:\n%s", argv, err, r.stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("capsem run %q did not finish within %v\nstderr:\n%s", argv, o.timeout, r.stderr)
	}
	r.session = sessionOf(r.stderr)
	t.Logf("capsem run %q: exit %d in %v, session %s", argv, r.code, time.Since(start).Round(time.Millisecond), r.session)
	if r.session == "" {
		t.Fatalf("capsem run %q printed no session id\nstderr:\n%s", argv, r.stderr)
	}
	checkNothingLeft(t, filepath.Join(o.data, "sessions", r.session), "path="+o.workspace+",")
	return r
}

// lineWriter calls fn with each whole line written to it.
type lineWriter struct {
	fn  func(string)
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.fn(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// sessionOf finds the session id in capsem run's closing line.
func sessionOf(stderr string) string {
	i := strings.LastIndex(stderr, "capsem: session ")
	if i < 0 {
		return ""
	}
	f := strings.Fields(stderr[i+len("capsem: session "):])
	if len(f) == 0 {
		return ""
	}
	return strings.TrimSuffix(f[0], ",")
}

// checkNothingLeft fails when a QEMU process is still running whose
// command line holds one of marks (the workspace a run exported, say), or
// a socket file was left under dir (a session's or the data directory).
func checkNothingLeft(t *testing.T, dir string, marks ...string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if !bytes.Contains(b, []byte("qemu-system")) {
			continue
		}
		for _, m := range marks {
			if bytes.Contains(b, []byte(m)) {
				t.Errorf("a QEMU is still running after capsem exited: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
			}
		}
	}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode()&os.ModeSocket != 0 {
			t.Errorf("socket left behind: %s", p)
		}
		return nil
	})
}

func exportRun(t *testing.T, data, session string) *sql.DB {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run.db")
	args := []string{"export", "--sqlite", out, "--data", data}
	if session != "" {
		args = append(args, "--session", session)
	}
	if b, err := exec.Command(capsemBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("capsem export: %v\n%s", err, b)
	}
	db, err := sql.Open("sqlite", out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s.String)
	}
	return out
}

func TestRunEchoAndExitCodes(t *testing.T) {
	needGuest(t)
	r := capsemRun(t, runOpts{}, nil, "echo", "hi")
	if r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("echo hi: exit %d, stdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r.session == "" || !strings.Contains(r.stderr, "capsem inspect "+r.session) {
		t.Errorf("no session id with the inspect hint at the end of stderr:\n%s", r.stderr)
	}

	r = capsemRun(t, runOpts{}, nil, "sh", "-c", "exit 42")
	if r.code != 42 {
		t.Fatalf("sh -c 'exit 42': exit %d\nstderr:\n%s", r.code, r.stderr)
	}

	r = capsemRun(t, runOpts{}, nil, "sh", "-c", "echo to-stdout; echo to-stderr >&2; echo more-stdout")
	if r.stdout != "to-stdout\nmore-stdout\n" {
		t.Errorf("stdout = %q, want only the stdout lines", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "to-stderr\n") || strings.Contains(r.stderr, "stdout") {
		t.Errorf("stderr = %q, want to-stderr first and no stdout line", r.stderr)
	}

	r = capsemRun(t, runOpts{}, nil, "no-such-command-capsem")
	if r.code != 127 {
		t.Errorf("a missing command: exit %d, want 127\nstderr:\n%s", r.code, r.stderr)
	}

	r = capsemRun(t, runOpts{}, []string{"--timeout", "3s"}, "sleep", "60")
	if r.code != 124 || !strings.Contains(r.stderr, "--timeout") {
		t.Errorf("--timeout 3s on sleep 60: exit %d, want 124 and a message\nstderr:\n%s", r.code, r.stderr)
	}
}

func TestRunStdinAndEnvironment(t *testing.T) {
	needGuest(t)
	r := capsemRun(t, runOpts{
		stdin: strings.NewReader("line one\nline two\n"),
		env:   []string{"CAPSEM_TEST_SECRET=hunter2-do-not-leak", "TZ=Europe/Paris", "LANG=C.UTF-8"},
	}, []string{"--env", "GIVEN=by-flag"}, "sh", "-c", "wc -l; env")
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "2\n") {
		t.Errorf("stdin did not reach the command: output starts %q", r.stdout)
	}
	if strings.Contains(r.stdout, "CAPSEM_TEST_SECRET") || strings.Contains(r.stdout, "hunter2") {
		t.Errorf("a host variable leaked into the guest:\n%s", r.stdout)
	}
	for _, want := range []string{"GIVEN=by-flag", "TZ=Europe/Paris", "LANG=C.UTF-8", "SSL_CERT_FILE=", "NODE_EXTRA_CA_CERTS=", "REQUESTS_CA_BUNDLE=", "CURL_CA_BUNDLE="} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("guest environment lacks %s:\n%s", want, r.stdout)
		}
	}
	for _, kv := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(kv, "HOME=") && kv != "HOME=/root" {
			t.Errorf("the host's HOME reached the guest: %s", kv)
		}
	}
}

func TestRunWorkspaceBothWays(t *testing.T) {
	needGuest(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "from-host.txt"), []byte("written on the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	r := capsemRun(t, runOpts{workspace: ws, data: data}, nil, "sh", "-c",
		"pwd; cat from-host.txt; mkdir -p sub && echo written in the guest > sub/from-guest.txt")
	if r.code != 0 || r.stdout != "/workspace\nwritten on the host\n" {
		t.Fatalf("exit %d, stdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(ws, "sub", "from-guest.txt"))
	if err != nil || string(b) != "written in the guest\n" {
		t.Fatalf("the guest's file on the host: %q, %v", b, err)
	}
	db := exportRun(t, data, r.session)
	paths := queryStrings(t, db, `SELECT action || ' ' || path FROM fs_events ORDER BY seq`)
	if !contains(paths, "created sub/from-guest.txt") {
		t.Errorf("fs_events do not record the guest's file: %q", paths)
	}
}

// allowedTestPolicy starts the test upstream as allowed.test, under a CA of
// its own, and returns a policy file that allows that one name, sends it
// there and trusts that CA.
func allowedTestPolicy(t *testing.T) string {
	t.Helper()
	upCA := newTestCA(t, "tests upstream CA")
	port := startHTTPS(t, upCA, upstreamHandler(), "allowed.test")
	pol := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(pol, []byte(fmt.Sprintf(`
[network]
default = "deny"
allow = ["allowed.test"]
[upstream]
resolve = { "allowed.test" = "127.0.0.1:%d" }
ca_files = [%q]
`, port, upCA.pemPath)), 0o644); err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestRunNetwork: through the MITM to a local upstream without -k, and
// every other way out refused and logged.
func TestRunNetwork(t *testing.T) {
	needGuest(t)
	pol := allowedTestPolicy(t)
	data := t.TempDir()
	script := strings.Join([]string{
		"uname -a",
		"curl -sS --max-time 20 https://allowed.test/hello; echo; echo curl-allowed=$?",
		"python3 -c 'import urllib.request; print(urllib.request.urlopen(\"https://allowed.test/hello\", timeout=20).read().decode())'",
		"curl -sS --max-time 5 https://1.1.1.1/ >/dev/null 2>&1; echo curl-ip=$?",
		"curl -sS --max-time 5 http://allowed.test/ >/dev/null 2>&1; echo curl-http=$?",
		"dig +time=3 +tries=1 @8.8.8.8 denied.test | grep -o 'status: [A-Z]*'",
		"ping -c 1 -W 3 1.1.1.1 >/dev/null 2>&1; echo ping=$?",
	}, "\n")
	r := capsemRun(t, runOpts{data: data, policy: pol}, nil, "sh", "-c", script)
	t.Logf("guest output:\n%s", r.stdout)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		image.DefaultKernel.Release,
		"hello from allowed.test via HTTP/2.0 path=/hello\ncurl-allowed=0",
		"hello from allowed.test via HTTP/1.1 path=/hello",
		"status: NXDOMAIN",
		"ping=1",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("guest output lacks %q", want)
		}
	}
	for _, bad := range []string{"curl-ip=0", "curl-http=0", "ping=0"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("a forbidden way out worked: %s", bad)
		}
	}

	db := exportRun(t, data, r.session)
	if got := queryStrings(t, db, `SELECT command FROM exec_events`); len(got) != 1 || !strings.HasPrefix(got[0], "sh -c") {
		t.Errorf("exec_events commands = %q, want the one sh -c", got)
	}
	if got := queryStrings(t, db, `SELECT CAST(exit_code AS TEXT) FROM exec_events`); len(got) != 1 || got[0] != "0" {
		t.Errorf("exec_events exit codes = %q", got)
	}
	checks := map[string]string{
		"the allowed HTTPS request":     `SELECT count(*) FROM net_events WHERE domain = 'allowed.test' AND decision = 'allowed' AND path = '/hello' AND status_code = 200`,
		"the direct IP 1.1.1.1:443":     `SELECT count(*) FROM net_events WHERE ip = '1.1.1.1' AND port = 443 AND decision = 'denied'`,
		"allowed.test on port 80":       `SELECT count(*) FROM net_events WHERE port = 80 AND decision = 'denied'`,
		"the DNS query for denied.test": `SELECT count(*) FROM dns_events WHERE qname LIKE 'denied.test%' AND decision = 'denied'`,
		"the ping to 1.1.1.1":           `SELECT count(*) FROM net_events WHERE transport = 'icmp' AND decision = 'denied'`,
	}
	wantInExport(t, db, checks)
}

// wantInExport fails the test for each what whose count query q finds no
// row in the export.
func wantInExport(t *testing.T, db *sql.DB, checks map[string]string) {
	t.Helper()
	for what, q := range checks {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n == 0 {
			t.Errorf("%s is not in the export (%s)", what, q)
		}
	}
}

// TestRunConcurrentIsolated runs two guests at once with the same data
// directory: neither sees the other's files, processes or addresses, and
// both sessions end up in the store.
func TestRunConcurrentIsolated(t *testing.T) {
	needGuest(t)
	data := t.TempDir()
	wsA, wsB := t.TempDir(), t.TempDir()
	var wg sync.WaitGroup
	var a, b runResult
	wg.Add(2)
	go func() {
		defer wg.Done()
		a = capsemRun(t, runOpts{data: data, workspace: wsA}, []string{"--cpus", "1", "--memory", "1024"}, "sh", "-c",
			"echo A > /tmp/only-in-a; echo A > mark-a; sleep 8; ls /tmp; ls /workspace; ps -eo args")
	}()
	go func() {
		defer wg.Done()
		time.Sleep(3 * time.Second)
		b = capsemRun(t, runOpts{data: data, workspace: wsB}, []string{"--cpus", "1", "--memory", "1024"}, "sh", "-c",
			"ls /tmp; ls /workspace; ps -eo args")
	}()
	wg.Wait()
	checkNothingLeft(t, data, "path="+wsA+",", "path="+wsB+",")
	if a.code != 0 || b.code != 0 {
		t.Fatalf("exit codes %d, %d\nA stderr:\n%s\nB stderr:\n%s", a.code, b.code, a.stderr, b.stderr)
	}
	if strings.Contains(b.stdout, "only-in-a") || strings.Contains(b.stdout, "mark-a") || strings.Contains(b.stdout, "sleep 8") {
		t.Errorf("guest B saw guest A's files or processes:\n%s", b.stdout)
	}
	if _, err := os.Stat(filepath.Join(wsB, "mark-a")); err == nil {
		t.Error("guest A wrote into guest B's workspace")
	}
	if a.session == "" || a.session == b.session {
		t.Errorf("sessions %q and %q: want two distinct ones", a.session, b.session)
	}
	out, err := exec.Command(capsemBin, "sessions", "--data", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), a.session) || !strings.Contains(string(out), b.session) {
		t.Errorf("capsem sessions does not list both runs: %v\n%s", err, out)
	}
}

// TestRunInteractiveShell drives `capsem run` with no command through a
// pty, as a user at a terminal would.
func TestRunInteractiveShell(t *testing.T) {
	needGuest(t)
	ptm, pts, err := openPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptm.Close()
	data, ws := t.TempDir(), t.TempDir()
	cmd := exec.Command(capsemBin, "run", "--data", data, "--workspace", ws, "--ca-dir", t.TempDir())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var out harness.SyncBuffer
	go func() { _, _ = io.Copy(&out, ptm) }()
	waitOut := func(want string, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no %q from the interactive shell within %v; the terminal shows:\n%s", want, d, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The shell's prompt ends in "# " (root); wait for it, then talk.
	waitOut("# ", 3*time.Minute)
	io.WriteString(ptm, "echo answer=$((6*7)); tty\n")
	waitOut("answer=42", time.Minute)
	waitOut("/dev/pts/", time.Minute)
	io.WriteString(ptm, "exit 7\n")
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("capsem run did not exit after the shell did; terminal:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("exit %d, want the shell's 7; terminal:\n%s", code, out.String())
	}
	// capsem's last line may still be in the pty when it exits.
	deadline := time.Now().Add(5 * time.Second)
	for sessionOf(out.String()) == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if id := sessionOf(out.String()); id == "" {
		t.Errorf("no session id on the terminal:\n%s", out.String())
	} else {
		checkNothingLeft(t, filepath.Join(data, "sessions", id), "path="+ws+",")
	}
}

// openPTY opens a pseudo-terminal pair.
func openPTY() (ptm, pts *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		m.Close()
		s.Close()
		return nil, nil, err
	}
	return m, s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRunGuestHardening checks, inside a running guest, what the agent
// locks down after boot and what the image must not contain.
func TestRunGuestHardening(t *testing.T) {
	needGuest(t)
	script := strings.Join([]string{
		"echo modules_disabled=$(cat /proc/sys/kernel/modules_disabled)",
		"echo kptr_restrict=$(cat /proc/sys/kernel/kptr_restrict)",
		"echo dmesg_restrict=$(cat /proc/sys/kernel/dmesg_restrict)",
		"echo ipv6_off=$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6)",
		"echo swaps=$(tail -n +2 /proc/swaps | wc -l)",
		"echo setuid=$(find / -xdev -perm /6000 -type f 2>/dev/null | wc -l)",
		"echo root=$(awk '$2==\"/\"{print $3}' /proc/mounts | tail -1)",
		"grep -c 'BEGIN CERTIFICATE' /usr/local/share/ca-certificates/capsem.crt",
	}, "; ")
	r := capsemRun(t, runOpts{}, nil, "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"modules_disabled=1", "kptr_restrict=2", "dmesg_restrict=1", "ipv6_off=1", "swaps=0", "setuid=0", "root=overlay", "\n1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("guest lacks %q:\n%s", want, r.stdout)
		}
	}
}
