package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// One sandbox through its life: what one command leaves is there for the
// next; exit codes, streams, stdin, timeouts and concurrency as capsem run
// has them; the host's environment stays out; stop keeps the disk, start
// brings it back with /tmp empty; rm then start is pristine; nothing is
// left after rm.
func TestSandboxLifecycle(t *testing.T) {
	e := newSBEnv(t)
	e.env = []string{"CAPSEM_TEST_SECRET=host-only"}
	e.start("life", "--env", "SANDBOX_VAR=from-start")
	if st := e.state("life"); st != "running" {
		t.Fatalf("state %q after start, want running", st)
	}
	r := e.must(1, nil, "start", "--ca-dir", e.caDir, "life")
	if !strings.Contains(r.stderr, "already running") {
		t.Errorf("a second start says %q, want \"already running\"", r.stderr)
	}
	execs := 0 // the exec_events the session must have, counted as they are made

	// Streams, codes, stdin, environment.
	r = e.exec("life", nil, nil, "sh", "-c", "echo out; echo err >&2; exit 42")
	execs++
	if r.code != 42 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("sh -c 'echo out; echo err >&2; exit 42': code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = e.exec("life", nil, nil, "no-such-command"); r.code != 127 {
		t.Errorf("a missing command: exit %d, want 127 (stderr %q)", r.code, r.stderr)
	}
	execs++
	if r = e.exec("life", nil, []byte("to the guest\n"), "cat"); r.stdout != "to the guest\n" {
		t.Errorf("stdin: cat gave %q", r.stdout)
	}
	execs++
	r = e.exec("life", []string{"--env", "EXEC_VAR=from-exec"}, nil, "env")
	execs++
	for _, want := range []string{"SANDBOX_VAR=from-start", "EXEC_VAR=from-exec"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("env lacks %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "CAPSEM_TEST_SECRET") {
		t.Errorf("the host's environment leaked into the guest:\n%s", r.stdout)
	}
	t0 := time.Now()
	if r = e.exec("life", []string{"--timeout", "2s"}, nil, "sleep", "60"); r.code != 124 {
		t.Errorf("--timeout 2s on sleep 60: exit %d, want 124", r.code)
	}
	execs++
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("--timeout 2s took %v", d)
	}

	// State across execs, four at once.
	e.sh("life", "echo kept > /root/a && echo etc > /etc/capsem-b && echo gone > /tmp/c")
	execs++
	var wg sync.WaitGroup
	outs := make([]string, 4)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.exec("life", nil, nil, "sh", "-c", fmt.Sprintf("sleep 1; cat /root/a; echo %d", i))
			outs[i] = fmt.Sprintf("%d:%s", r.code, r.stdout)
		}()
	}
	wg.Wait()
	execs += 4
	for i, o := range outs {
		if want := fmt.Sprintf("0:kept\n%d\n", i); o != want {
			t.Errorf("concurrent exec %d: %q, want %q", i, o, want)
		}
	}

	// Stop keeps the disk; start brings it back with an empty /tmp.
	st := e.ls()["life"]
	firstSession := st.SessionID
	r = e.must(0, nil, "stop", "life")
	t.Logf("capsem stop: %v", r.took.Round(time.Millisecond))
	if st := e.state("life"); st != "stopped" {
		t.Errorf("state %q after stop, want stopped", st)
	}
	if q := qemuOf(filepath.Join(e.data, "sandboxes", "life")); len(q) > 0 {
		t.Errorf("QEMU still running after stop: %v", q)
	}
	r = e.exec("life", nil, nil, "true")
	if r.code != 1 || !strings.Contains(r.stderr, "capsem start life") {
		t.Errorf("exec in a stopped sandbox: exit %d, stderr %q; want 1 naming capsem start life", r.code, r.stderr)
	}
	e.start("life")
	if out := e.sh("life", "cat /root/a /etc/capsem-b; ls -A /tmp | wc -l"); out != "kept\netc\n0\n" {
		t.Errorf("after stop/start: %q, want /root/a and /etc/capsem-b kept and /tmp empty", out)
	}
	e.must(0, nil, "stop", "life")

	// Every exec of the first start is an exec_event of its session.
	db := exportRun(t, e.data, firstSession)
	if n := queryStrings(t, db, "SELECT count(*) FROM exec_events"); len(n) != 1 || n[0] != fmt.Sprint(execs) {
		t.Errorf("exec_events of the first start: %v, want %d", n, execs)
	}
	if s := queryStrings(t, db, "SELECT sandbox FROM sessions"); len(s) != 1 || s[0] != "life" {
		t.Errorf("sessions.sandbox = %v, want [life]", s)
	}

	// rm, then start: pristine. Nothing is left.
	e.start("life")
	r = e.must(1, nil, "rm", "life")
	if !strings.Contains(r.stderr, "--force") {
		t.Errorf("rm of a running sandbox: %q, want the --force hint", r.stderr)
	}
	sock := e.ls()["life"].Socket
	e.must(0, nil, "rm", "--force", "life")
	if _, err := os.Stat(filepath.Join(e.data, "sandboxes", "life")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox directory is left after rm: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket %s is left after rm: %v", sock, err)
	}
	if q := qemuOf(filepath.Join(e.data, "sandboxes", "life")); len(q) > 0 {
		t.Errorf("QEMU still running after rm: %v", q)
	}
	e.start("life")
	if out := e.sh("life", "ls /root/a /etc/capsem-b 2>&1 | grep -c 'No such file'"); out != "2\n" {
		t.Errorf("after rm and start, the old files: %q, want both gone", out)
	}
	r = e.must(0, nil, "sessions", "--json")
	if n := strings.Count(r.stdout, `"id"`); n < 3 {
		t.Errorf("capsem sessions lists %d sessions after rm; the record outlives the sandbox:\n%s", n, r.stdout)
	}
}

// A supervisor killed outright takes its QEMU with it; ls says crashed;
// start recovers the sandbox.
func TestSandboxSupervisorKilled(t *testing.T) {
	e := newSBEnv(t)
	e.start("crash", "--disk", "1")
	e.sh("crash", "echo before > /root/f && sync")
	st := e.ls()["crash"]
	if st.PID == 0 {
		t.Fatalf("ls --json gives no supervisor pid: %+v", st)
	}
	mark := filepath.Join(e.data, "sandboxes", "crash")
	if len(qemuOf(mark)) == 0 {
		t.Fatal("no QEMU found for the running sandbox (the check would pass vacuously)")
	}
	if err := unix.Kill(st.PID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(qemuOf(mark)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if q := qemuOf(mark); len(q) > 0 {
		t.Errorf("QEMU %v still running 2 s after its supervisor was killed", q)
	}
	st = e.ls()["crash"]
	if st.State != "crashed" || !strings.Contains(e.must(0, nil, "ls").stdout, st.Log) {
		t.Errorf("after SIGKILL: state %q (want crashed, with the log path in ls)", st.State)
	}
	e.start("crash")
	if out := e.sh("crash", "cat /root/f"); out != "before\n" {
		t.Errorf("after the crash and a start: /root/f = %q", out)
	}

	// The disk's cap is the guest's ENOSPC, never more on the host; the
	// space of deleted files goes back; --disk grows it on a restart, in
	// the guest.
	r := e.exec("crash", nil, nil, "sh", "-c", "dd if=/dev/zero of=/root/fill bs=1M count=1300 2>&1; sync")
	if !strings.Contains(r.stdout, "No space left on device") {
		t.Errorf("filling a 1 GiB disk with 1300 MiB: %q, want ENOSPC", r.stdout)
	}
	disk := filepath.Join(e.data, "sandboxes", "crash", "disk.ext4")
	if used, size := diskUse(t, disk); used > size || size != 1<<30 {
		t.Errorf("the disk file takes %d of %d bytes on the host, past its cap", used, size)
	}
	e.sh("crash", "rm /root/fill && sync && fstrim / 2>/dev/null; true")
	time.Sleep(time.Second)
	if used, _ := diskUse(t, disk); used > 512<<20 {
		t.Errorf("after deleting the file the disk file still takes %d MiB on the host", used>>20)
	}
	e.must(0, nil, "stop", "crash")
	// The host only lengthens the file; the guest's kernel grows the
	// filesystem in it. Host tools that would parse the guest-written
	// image come first on PATH and record being run: they must not be,
	// since a filesystem the guest wrote is hostile input to any host
	// parser.
	fake, ran := t.TempDir(), filepath.Join(t.TempDir(), "ran")
	for _, tool := range []string{"e2fsck", "resize2fs", "fsck.ext4", "debugfs", "tune2fs"} {
		script := "#!/bin/sh\necho \"" + tool + " $*\" >> '" + ran + "'\nexit 0\n"
		if err := os.WriteFile(filepath.Join(fake, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	usedBefore, _ := diskUse(t, disk)
	e.env = append(e.env, "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	e.start("crash", "--disk", "2")
	e.env = e.env[:len(e.env)-1]
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("start --disk 2 ran host tools on the guest's disk:\n%s", b)
	}
	out := e.sh("crash", "df -BM --output=size /run/capsem/rw | tail -1; cat /root/f")
	var mib int
	fmt.Sscanf(strings.TrimSpace(out), "%dM", &mib)
	if !strings.Contains(out, "before") || mib < 1900 || mib > 2048 {
		t.Errorf("after start --disk 2: %q, want a ~2 GiB filesystem with /root/f kept", out)
	}
	var facts struct {
		Ready struct {
			Root string `json:"root"`
		} `json:"ready"`
	}
	json.Unmarshal([]byte(e.sh("crash", "cat /run/capsem/boot.json")), &facts)
	if !strings.Contains(facts.Ready.Root, "the writable disk grown from") {
		t.Errorf("the guest's boot facts do not say it grew its disk: root %q", facts.Ready.Root)
	}
	if used, size := diskUse(t, disk); size != 2<<30 || used > usedBefore+64<<20 {
		t.Errorf("after growing to 2 GiB the disk file is %d bytes taking %d MiB on the host (%d MiB before)", size, used>>20, usedBefore>>20)
	} else {
		t.Logf("growing 1 to 2 GiB: the disk file takes %d MiB on the host (%d MiB before)", used>>20, usedBefore>>20)
	}
	if r := e.must(2, nil, "start", "--dry-run", "--disk", "1", "crash"); !strings.Contains(r.stderr, "cannot shrink") {
		t.Errorf("start --disk 1 of a 2 GiB disk: %q", r.stderr)
	}
}

// diskUse is what a file takes on the host's disk, and its size.
func diskUse(t *testing.T, path string) (used, size int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512, st.Size
}
