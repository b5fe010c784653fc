package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/tests/harness"
)

// The long-lived sandbox tests drive `capsem start/exec/ls/stop/rm` as a
// user does, against the real guest under QEMU (TCG here).

// sbEnv is one test's data directory, CA and workspace.
type sbEnv struct {
	t                    *testing.T
	data, caDir, ws, bin string
	env                  []string // the capsem processes' environment additions
}

func newSBEnv(t *testing.T) *sbEnv {
	t.Helper()
	needGuest(t)
	e := &sbEnv{t: t, data: t.TempDir(), caDir: sharedCADir, ws: t.TempDir(), bin: capsemBin}
	t.Cleanup(e.removeAll)
	return e
}

// removeAll removes every sandbox the test left, running or not.
func (e *sbEnv) removeAll() {
	entries, _ := os.ReadDir(filepath.Join(e.data, "sandboxes"))
	for _, d := range entries {
		_, _ = e.capsem(nil, "rm", "--force", "--data", e.data, d.Name())
	}
}

// sbResult is one finished capsem command.
type sbResult struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// capsem runs the capsem binary with args and stdin.
func (e *sbEnv) capsem(stdin []byte, args ...string) (sbResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = append(os.Environ(), e.env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := sbResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode(), took: time.Since(t0)}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return r, err
	}
	return r, nil
}

// must runs a capsem subcommand (with --data), failing the test when it
// does not exit with want.
func (e *sbEnv) must(want int, stdin []byte, sub string, args ...string) sbResult {
	e.t.Helper()
	full := append([]string{sub, "--data", e.data}, args...)
	r, err := e.capsem(stdin, full...)
	if err != nil {
		e.t.Fatalf("capsem %s: %v", strings.Join(full, " "), err)
	}
	if r.code != want {
		e.t.Fatalf("capsem %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(full, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

func (e *sbEnv) start(name string, flags ...string) sbResult {
	e.t.Helper()
	args := append([]string{"--ca-dir", e.caDir, "--workspace", e.ws}, flags...)
	r := e.must(0, nil, "start", append(args, name)...)
	e.t.Logf("capsem start %s: %v", name, r.took.Round(time.Millisecond))
	return r
}

// exec runs CMD in sandbox name and returns the result, whatever its code.
func (e *sbEnv) exec(name string, flags []string, stdin []byte, argv ...string) sbResult {
	e.t.Helper()
	args := append([]string{"exec", "--data", e.data}, flags...)
	args = append(append(append(args, name), "--"), argv...)
	r, err := e.capsem(stdin, args...)
	if err != nil {
		e.t.Fatalf("capsem exec %q: %v", argv, err)
	}
	return r
}

// sh runs a shell script in sandbox name and wants it to exit 0.
func (e *sbEnv) sh(name, script string) string {
	e.t.Helper()
	r := e.exec(name, nil, nil, "sh", "-c", script)
	if r.code != 0 {
		e.t.Fatalf("in %s: sh -c %q: exit %d\nstdout:\n%s\nstderr:\n%s", name, script, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// sbStatus is what `capsem ls --json` says of one sandbox.
type sbStatus struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	SessionID string   `json:"session_id"`
	PID       int      `json:"pid"`
	Log       string   `json:"log"`
	Socket    string   `json:"socket"`
	Policy    string   `json:"policy"`
	PolicySHA string   `json:"policy_sha256"`
	DiskUsed  int64    `json:"disk_used"`
	DiskSize  int64    `json:"disk_size"`
	Workspace string   `json:"workspace"`
	CPUs      int      `json:"cpus"`
	MemoryMiB int      `json:"memory_mib"`
	Asked     []string `json:"asked"`
}

func (e *sbEnv) ls() map[string]sbStatus {
	e.t.Helper()
	r := e.must(0, nil, "ls", "--json")
	var list []sbStatus
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		e.t.Fatalf("capsem ls --json: %v\n%s", err, r.stdout)
	}
	out := map[string]sbStatus{}
	for _, s := range list {
		out[s.Name] = s
	}
	return out
}

func (e *sbEnv) state(name string) string { return e.ls()[name].State }

// apiClient is an HTTP client of sandbox name's API socket, as curl
// --unix-socket uses it (URLs http://capsem/v1/…).
func (e *sbEnv) apiClient(name string) *http.Client {
	sock := e.ls()[name].Socket
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// qemuOf lists the live QEMU processes whose command line holds mark (a
// sandbox's directory); zombies, which hold nothing, are not counted.
func qemuOf(mark string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("qemu-system")) || !bytes.Contains(b, []byte(mark)) {
			continue
		}
		var pid int
		fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid)
		pids = append(pids, pid)
	}
	return pids
}

// Two sandboxes see neither each other's files nor processes.
func TestSandboxIsolation(t *testing.T) {
	e := newSBEnv(t)
	e.start("iso-a")
	e.start("iso-b")
	e.sh("iso-a", "echo a > /root/mine; sleep 300 >/dev/null 2>&1 &")
	if out := e.sh("iso-b", "ls /root/mine 2>&1 || true; pgrep -c 'sleep' || true"); !strings.Contains(out, "No such file") || !strings.HasSuffix(out, "0\n") {
		t.Errorf("iso-b sees iso-a's file or process: %q", out)
	}

	// capsem doctor --sandbox proves the walls inside a sandbox that
	// exists, under its own (default) policy, and leaves nothing there.
	r := e.must(0, nil, "doctor", "--sandbox", "iso-b")
	if !strings.Contains(r.stdout, " passed") || strings.Contains(r.stdout, " failed") {
		t.Errorf("capsem doctor --sandbox iso-b:\n%s", r.stdout)
	}
	if out := e.sh("iso-b", "ls /tmp | grep -c capsem-doctor || true"); out != "0\n" {
		t.Errorf("the doctor left its suite in the sandbox's /tmp: %q", out)
	}
}

// A policy reload swaps the policy for new flows; a broken file keeps the
// one in force and exits 2 with file:line.
func TestSandboxPolicyReload(t *testing.T) {
	e := newSBEnv(t)
	pol := filepath.Join(t.TempDir(), "policy.toml")
	write := func(s string) {
		if err := os.WriteFile(pol, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[network]\ndefault = \"deny\"\nallow = [\"one.test\"]\n")
	// A secret's real value comes from start's environment; one that is
	// missing, or a name without hosts, is exit 2 before anything boots.
	if r := e.must(2, nil, "start", "--ca-dir", e.caDir, "--secret", "MY_TOKEN@secret.test", "nokey"); !strings.Contains(r.stderr, "MY_TOKEN is not set") {
		t.Errorf("a missing secret says %q", r.stderr)
	}
	if r := e.must(2, nil, "start", "--ca-dir", e.caDir, "--secret", "MY_TOKEN", "nohost"); !strings.Contains(r.stderr, "which hosts MY_TOKEN belongs to") {
		t.Errorf("a secret without hosts says %q", r.stderr)
	}
	real := "rv-sandbox-real-value-0123456789"
	e.env = []string{"MY_TOKEN=" + real}
	e.start("pol", "--policy", pol, "--secret", "MY_TOKEN@secret.test")
	e.env = nil
	resolves := func(name string) bool {
		r := e.exec("pol", nil, nil, "getent", "hosts", name)
		return r.code == 0
	}
	if !resolves("one.test") || resolves("two.test") || !resolves("secret.test") {
		t.Fatal("before the reload: one.test and the secret's secret.test must resolve and two.test not")
	}
	placeholder := strings.TrimSpace(e.exec("pol", nil, nil, "printenv", "MY_TOKEN").stdout)
	if !strings.HasPrefix(placeholder, "capsem-secret-") {
		t.Errorf("the sandbox's MY_TOKEN is %q, want a placeholder", placeholder)
	}
	sha := e.ls()["pol"].PolicySHA

	write("[network]\ndefault = \"deny\"\nallow = [\"two.test\"]\n[broken\n")
	r := e.must(2, nil, "policy", "reload", "pol")
	if !strings.Contains(r.stderr, pol+":") {
		t.Errorf("a broken policy's reload says %q, want file:line", r.stderr)
	}
	if !resolves("one.test") || resolves("two.test") || e.ls()["pol"].PolicySHA != sha {
		t.Error("a broken reload changed the policy in force")
	}

	write("[network]\ndefault = \"deny\"\nallow = [\"two.test\"]\n")
	e.must(0, nil, "policy", "reload", "pol")
	if resolves("one.test") || !resolves("two.test") || !resolves("secret.test") {
		t.Error("after the reload: two.test and secret.test must resolve and one.test not")
	}
	if got := strings.TrimSpace(e.exec("pol", nil, nil, "printenv", "MY_TOKEN").stdout); got != placeholder {
		t.Errorf("after the reload MY_TOKEN is %q, want the placeholder the guest held, %q", got, placeholder)
	}
	if b, err := os.ReadFile(filepath.Join(e.data, "sandboxes", "pol", "settings.json")); err != nil || !strings.Contains(string(b), "MY_TOKEN@secret.test") || strings.Contains(string(b), real) {
		t.Errorf("settings.json keeps the --secret flag, never the value: %v\n%s", err, b)
	}
	if e.ls()["pol"].PolicySHA == sha {
		t.Error("ls shows the old policy's sha256 after the reload")
	}

	// The API as curl uses it: a buffered exec answers JSON, errors say
	// what to do.
	hc := e.apiClient("pol")
	resp, err := hc.Post("http://capsem/v1/exec", "application/json", strings.NewReader(`{"argv": ["sh", "-c", "echo hi; echo oops >&2; exit 3"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var be struct {
		Code   int    `json:"exit_code"`
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
	}
	json.NewDecoder(resp.Body).Decode(&be)
	resp.Body.Close()
	if be.Code != 3 || be.Stdout != "hi\n" || be.Stderr != "oops\n" {
		t.Errorf("buffered POST /v1/exec: %+v", be)
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/exec", `{"argv": ["true"], "bogus": 1}`, "ExecRequest"},
		{"GET", "/v1/files", "", "path=P is required"},
		{"GET", "/v1/nothing", "", "docs/API.md"},
		{"GET", "/v1/events?since=x", "", "sequence number"},
	} {
		req, _ := http.NewRequest(c.method, "http://capsem"+c.path, strings.NewReader(c.body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb struct {
			Error string `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode/100 != 4 || !strings.Contains(eb.Error, c.want) {
			t.Errorf("%s %s: %d %q, want a 4xx saying %q", c.method, c.path, resp.StatusCode, eb.Error, c.want)
		}
	}

	// The running session is seen by sessions, inspect and export.
	id := e.ls()["pol"].SessionID
	r = e.must(0, nil, "sessions", "--json")
	var sums []struct {
		ID      string `json:"id"`
		Running bool   `json:"running"`
		Sandbox string `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sums); err != nil || len(sums) == 0 || sums[0].ID != id || !sums[0].Running || sums[0].Sandbox != "pol" {
		t.Errorf("capsem sessions --json while running: %s (%v); want %s first, running, sandbox pol", r.stdout, err, id)
	}
	if r = e.must(0, nil, "inspect", "--ca-dir", e.caDir, id); !strings.Contains(r.stdout, "two.test") {
		t.Errorf("capsem inspect %s of the running session does not show its DNS queries:\n%s", id, r.stdout)
	}
	db := exportRun(t, e.data, id)
	if q := queryStrings(t, db, "SELECT qname FROM dns_events WHERE decision = 'allowed' ORDER BY seq"); !contains(q, "one.test") || !contains(q, "two.test") {
		t.Errorf("the export of the running session has allowed DNS answers %v, want one.test and two.test", q)
	}
}

// Ctrl-C over a pty ends the command, not the sandbox.
func TestSandboxCtrlC(t *testing.T) {
	e := newSBEnv(t)
	e.start("intr")
	ptm, pts, err := openPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptm.Close()
	// One process, ready once its SIGINT handling is in place (a shell that
	// gets the signal before it has forked its sleep may outlive it).
	cmd := exec.Command(capsemBin, "exec", "--data", e.data, "intr", "--", "python3", "-c", "import time; print('ready', flush=True); time.sleep(600)")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var out bytes.Buffer
	var mu sync.Mutex
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		ready := strings.Contains(out.String(), "ready")
		mu.Unlock()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no \"ready\" on the terminal: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ptm.Write([]byte{3}) // Ctrl-C
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("Ctrl-C did not end the command within 30 s")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d after Ctrl-C, want 130 (128+SIGINT)", code)
	}
	if out := e.sh("intr", "echo still here"); out != "still here\n" {
		t.Errorf("the sandbox after Ctrl-C: %q", out)
	}

	// capsem shell: a login shell on a pty, its exit code capsem's.
	ptm2, pts2, err := openPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm2.Close()
	sh := exec.Command(capsemBin, "shell", "--data", e.data, "intr")
	sh.Stdin, sh.Stdout, sh.Stderr = pts2, pts2, pts2
	sh.SysProcAttr = &unix.SysProcAttr{Setsid: true, Setctty: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	pts2.Close()
	var term harness.SyncBuffer
	go func() { _, _ = io.Copy(&term, ptm2) }()
	waitTerm := func(want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(term.String(), want) {
			if time.Now().After(deadline) {
				sh.Process.Kill()
				t.Fatalf("no %q from capsem shell; the terminal shows:\n%s", want, term.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitTerm("# ")
	io.WriteString(ptm2, "echo answer=$((6*7)) login=$(shopt -q login_shell && echo yes); tty\n")
	waitTerm("answer=42 login=yes")
	waitTerm("/dev/pts/")
	io.WriteString(ptm2, "exit 7\n")
	shDone := make(chan error, 1)
	go func() { shDone <- sh.Wait() }()
	select {
	case <-shDone:
	case <-time.After(30 * time.Second):
		sh.Process.Kill()
		t.Fatalf("capsem shell did not exit with its shell; terminal:\n%s", term.String())
	}
	if code := sh.ProcessState.ExitCode(); code != 7 {
		t.Errorf("capsem shell exited %d, want the shell's 7", code)
	}
}

// A dry run prints the plan and creates nothing; it never prints an
// --env value. A bad name is refused with the rule.
func TestSandboxDryRunAndNames(t *testing.T) {
	e := &sbEnv{t: t, data: t.TempDir(), caDir: sharedCADir, ws: t.TempDir(), bin: capsemBin}
	pol := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(pol, []byte("[network]\nallow = [\"a.test\", \"b.test:8443\"]\n[[http]]\nhost = \"a.test\"\nmethods = [\"POST\"]\naction = \"deny\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"start", "--data", e.data, "--dry-run", "--json", "--policy", pol, "--workspace", e.ws, "--env", "TOKEN=s3cret-value", "--disk", "3", "plan-me"},
		{"run", "--data", e.data, "--dry-run", "--json", "--policy", pol, "--workspace", e.ws, "--env", "TOKEN=s3cret-value", "--", "echo", "hi"},
	} {
		r, err := e.capsem(nil, args...)
		if err != nil || r.code != 0 {
			t.Fatalf("capsem %s: exit %d %v\n%s", strings.Join(args, " "), r.code, err, r.stderr)
		}
		var p struct {
			Policy struct {
				Allow []string `json:"allow"`
				HTTP  []string `json:"http_rules"`
			} `json:"policy"`
			EnvNames  []string `json:"env_names"`
			Workspace string   `json:"workspace"`
			DiskGiB   int      `json:"disk_gib"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, r.stdout)
		}
		if strings.Join(p.Policy.Allow, ",") != "a.test,b.test:8443" || len(p.Policy.HTTP) != 1 || !contains(p.EnvNames, "TOKEN") || p.Workspace != e.ws {
			t.Errorf("%s --dry-run plan: %s", args[0], r.stdout)
		}
		if args[0] == "start" && p.DiskGiB != 3 {
			t.Errorf("start --dry-run: disk_gib %d, want 3", p.DiskGiB)
		}
		if strings.Contains(r.stdout+r.stderr, "s3cret-value") {
			t.Errorf("%s --dry-run printed an --env value:\n%s", args[0], r.stdout)
		}
		entries, _ := os.ReadDir(e.data)
		if len(entries) > 0 {
			t.Errorf("%s --dry-run created %v in the data directory", args[0], entries)
		}
	}
	for _, bad := range []string{"Upper", "-lead", "a_b", strings.Repeat("a", 64), "a/b"} {
		r, _ := e.capsem(nil, "start", "--data", e.data, "--", bad)
		if r.code != 2 || !strings.Contains(r.stderr, "a-z, 0-9") {
			t.Errorf("capsem start %q: exit %d %q, want 2 with the rule", bad, r.code, r.stderr)
		}
	}
	r, _ := e.capsem(nil, "exec", "--data", e.data, "nobox", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "capsem start nobox") {
		t.Errorf("exec in a missing sandbox: exit %d %q, want 1 naming capsem start nobox", r.code, r.stderr)
	}
}

// --foreground runs the supervisor in place: the process is the sandbox,
// and SIGTERM stops it cleanly. A guest that powers itself off leaves the
// sandbox crashed, and a start recovers it.
func TestSandboxForegroundAndGuestDeath(t *testing.T) {
	e := newSBEnv(t)
	cmd := exec.Command(capsemBin, "start", "--foreground", "--data", e.data, "--ca-dir", e.caDir, "--workspace", e.ws, "fg")
	var stderr harness.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(stderr.String(), "is running") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("capsem start --foreground did not say it runs: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := e.ls()["fg"]; st.State != "running" || st.PID != cmd.Process.Pid {
		t.Errorf("ls: %+v, want running with the foreground process's pid %d", st, cmd.Process.Pid)
	}
	if out := e.sh("fg", "echo hi"); out != "hi\n" {
		t.Errorf("exec in a foreground sandbox: %q", out)
	}
	cmd.Process.Signal(unix.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("capsem start --foreground after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("SIGTERM did not stop the foreground supervisor within 30 s")
	}
	if st := e.state("fg"); st != "stopped" {
		t.Errorf("state %q after SIGTERM, want stopped", st)
	}

	e.start("fg")
	r := e.exec("fg", nil, nil, "sh", "-c", "echo o > /proc/sysrq-trigger; sleep 30")
	if r.code == 0 {
		t.Errorf("a command whose guest powered off under it exited 0")
	}
	deadline = time.Now().Add(10 * time.Second)
	for e.state("fg") != "crashed" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if st := e.ls()["fg"]; st.State != "crashed" {
		t.Errorf("after the guest powered itself off: %+v, want crashed", st)
	}
	if q := qemuOf(filepath.Join(e.data, "sandboxes", "fg")); len(q) > 0 {
		t.Errorf("QEMU left after the guest's death: %v", q)
	}
	e.start("fg")
	if out := e.sh("fg", "echo back"); out != "back\n" {
		t.Errorf("after the crash and a start: %q", out)
	}
}
