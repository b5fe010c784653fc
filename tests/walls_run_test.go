package tests

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The walls, tried from inside a real guest as root: what guest root does
// to the workspace and to the control channel must not reach the host's
// files, the host's memory or the host's record. The control-channel
// attacks use guest/diagnostics/hostile_agent.py (the doctor's own), copied
// into the workspace.

// hostileScript puts the doctor's hostile_agent.py into ws.
func hostileScript(t *testing.T, ws string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "guest", "diagnostics", "hostile_agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "hostile_agent.py"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Guest root cannot leave a setuid file, a device, a FIFO, a symlink or a
// file of another owner in the host's workspace: with security_model=none
// (before) `chmod 6755` of a root-owned copy of dash made a setuid-root
// binary any host user could run.
func TestRunGuestCannotPlantHostFiles(t *testing.T) {
	needGuest(t)
	const plant = `cp /bin/dash s && chown 0:0 s && chmod 6755 s && ` +
		`mkdir d && chmod 4777 d && mknod dev c 1 3 && mkfifo fifo && ln -s /etc/shadow link && ` +
		`touch other && chown 1234:1234 other && ls -ln`
	for _, tc := range []struct {
		name  string
		owner int // of the workspace; -1: leave it root's
		why   string
	}{
		{"user workspace", 65534, "QEMU drops to the workspace owner: guest files are the user's"},
		{"root workspace", -1, "QEMU stays root, but guest modes still live only in xattrs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			wantUID := uint32(0)
			if tc.owner >= 0 {
				if err := os.Chown(ws, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
				wantUID = uint32(tc.owner)
			}
			r := capsemRun(t, runOpts{workspace: ws}, nil, "sh", "-c", plant)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "-rwsr-sr-x") {
				t.Fatalf("the guest does not see its own setuid file (its view lives in xattrs):\n%s", r.stdout)
			}
			for _, name := range []string{"s", "d", "dev", "fifo", "link", "other"} {
				st, err := os.Lstat(filepath.Join(ws, name))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				m := st.Mode()
				sys := st.Sys().(*syscall.Stat_t)
				if m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
					t.Errorf("%s is %v on the host (%s)", name, m, tc.why)
				}
				if m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSymlink|fs.ModeSocket) != 0 {
					t.Errorf("%s is a %v on the host, not a plain file", name, m.Type())
				}
				if sys.Uid != wantUID || sys.Gid != wantUID {
					t.Errorf("%s is owned by %d:%d on the host, want %d (%s)", name, sys.Uid, sys.Gid, wantUID, tc.why)
				}
			}
		})
	}
}

// What guest root writes on the agent's port is not the host's record: an
// exec event for a command the host never started (or another argv for the
// one it did) is not stored, and a file event dated 2000 is stored with the
// host's receive time, the guest's claim beside it.
func TestRunForgedAgentReportsAreNotTheRecord(t *testing.T) {
	needGuest(t)
	ws, data := t.TempDir(), t.TempDir()
	hostileScript(t, ws)
	before := time.Now()
	r := capsemRun(t, runOpts{workspace: ws, data: data}, nil, "sh", "-c", "python3 hostile_agent.py forge && sleep 1")
	if r.code != 0 || !strings.Contains(r.stdout, "forged") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	db := exportRun(t, data, r.session)
	argvs := queryStrings(t, db, `SELECT argv FROM exec_events`)
	if len(argvs) != 1 || strings.Contains(argvs[0], "forged") || !strings.Contains(argvs[0], "hostile_agent.py forge") {
		t.Errorf("exec_events argv = %q, want only the command the host started", argvs)
	}
	rows := queryStrings(t, db, `SELECT timestamp || ' ' || guest_time FROM fs_events WHERE path = 'forged-by-guest-root.txt'`)
	if len(rows) != 1 {
		t.Fatalf("fs_events for the forged path: %q, want one (guest-reported events are kept, as reports)", rows)
	}
	f := strings.Fields(rows[0])
	ts, err := time.Parse(time.RFC3339Nano, f[0])
	if err != nil || ts.Before(before.Add(-time.Minute)) {
		t.Errorf("the forged file event's timestamp is %q: want the host's receive time, after %v", f[0], before)
	}
	if len(f) < 2 || !strings.HasPrefix(f[1], "2000-01-01") {
		t.Errorf("guest_time = %q, want the guest's claim 2000-01-01", rows[0])
	}
}

// Pings from guest root without end, while the agent (the only reader of
// the host's Pongs) is stopped: the host stays within a few tens of MB (it
// grew to 3.9 GB in 22 s and was OOM-killed before), and once a Pong has
// waited for the write timeout (5 s) the guest is cut off and stopped, on
// record as a protocol violation that says it stopped reading (before, the
// blocked Pong held the write lock: the run's --timeout, Ctrl-C and the
// watchdog waited on it).
func TestRunPingFloodIsBounded(t *testing.T) {
	needGuest(t)
	ws, data := t.TempDir(), t.TempDir()
	hostileScript(t, ws)
	var mu sync.Mutex
	var peak int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	start := time.Now()
	r := capsemRun(t, runOpts{workspace: ws, data: data, onStart: func(pid int) {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if kb := rssKB(pid); kb > 0 {
					mu.Lock()
					peak = max(peak, kb)
					mu.Unlock()
				}
			}
		}()
	}}, nil, "sh", "-c", "python3 hostile_agent.py ping-flood 120")
	took := time.Since(start)
	close(stop)
	sampler.Wait()
	t.Logf("cut off after %v in all; capsem's peak RSS %d MiB", took.Round(time.Millisecond), peak>>10)
	if r.code == 0 || !strings.Contains(r.stderr, "stopped reading the control channel") {
		t.Fatalf("exit %d, want a failure that says the guest stopped reading\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if took > 100*time.Second {
		t.Errorf("the run took %v: the flood (120 s) was not cut off", took)
	}
	// Measured 47–61 MB through 20M pings; 3.9 GB before.
	if peak > 300<<10 {
		t.Errorf("capsem's RSS peaked at %d MiB under the ping flood; want under 300", peak>>10)
	}
	db := exportRun(t, data, r.session)
	got := queryStrings(t, db, `SELECT state || ': ' || detail FROM agent_events WHERE state = 'protocol-violation'`)
	if len(got) != 1 || !strings.Contains(got[0], "stopped reading") {
		t.Errorf("agent_events = %q, want one protocol violation that says the agent stopped reading", got)
	}
}

// rssKB is a process's resident set in KiB, or 0.
func rssKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// A frame that breaks the protocol cuts the agent off: the VM is stopped,
// capsem run says why and fails, and the session is ended, flushed and on
// record with the violation — the host process goes on.
func TestRunProtocolViolationStopsTheGuest(t *testing.T) {
	needGuest(t)
	ws, data := t.TempDir(), t.TempDir()
	hostileScript(t, ws)
	r := capsemRun(t, runOpts{workspace: ws, data: data}, nil, "sh", "-c", "python3 hostile_agent.py malformed; sleep 60")
	if r.code == 0 || !strings.Contains(r.stderr, "broke the protocol") {
		t.Fatalf("exit %d, want a failure that names the violation\nstderr:\n%s", r.code, r.stderr)
	}
	db := exportRun(t, data, r.session)
	if got := queryStrings(t, db, `SELECT state FROM agent_events`); len(got) != 1 || got[0] != "protocol-violation" {
		t.Errorf("agent_events = %q, want the protocol violation", got)
	}
	if got := queryStrings(t, db, `SELECT ended_at FROM sessions`); len(got) != 1 || got[0] == "" {
		t.Errorf("sessions.ended_at = %q: the session was not ended", got)
	}
}

// The console log is capped: guest root writing to the serial port without
// end fills it to --console-log-max and no further (7.5 MB in 15 s before).
func TestRunConsoleLogIsCapped(t *testing.T) {
	needGuest(t)
	data := t.TempDir()
	const limit = 64 << 10
	r := capsemRun(t, runOpts{data: data}, []string{"--console-log-max", strconv.Itoa(limit)},
		"sh", "-c", "head -c 600000 /dev/zero | tr '\\0' x > /dev/ttyS0; echo written")
	if r.code != 0 || !strings.Contains(r.stdout, "written") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	log := filepath.Join(data, "sessions", r.session, "console.log")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > limit+200 {
		t.Errorf("console.log is %d bytes with --console-log-max %d", len(b), limit)
	}
	_, tail, cut := strings.Cut(string(b), "bytes were dropped here")
	if !cut || !strings.Contains(tail, strings.Repeat("x", 1000)) {
		t.Errorf("console.log does not say what it dropped and keep the latest output after it:\n%q", b[max(0, len(b)-300):])
	}
}

// capsem run killed with SIGKILL mid-session: QEMU dies with it, the
// session is found and moved by the next capsem command and shows as not
// ended, its events up to the kill are there, and the next run starts.
func TestRunKilledMidSession(t *testing.T) {
	needGuest(t)
	data, ws := t.TempDir(), t.TempDir()
	cmd := exec.Command(capsemBin, "run", "--data", data, "--workspace", ws, "--ca-dir", t.TempDir(), "--",
		"sh", "-c", "getent hosts api.anthropic.com; echo ready; sleep 600")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("capsem run ended before the command was ready")
		}
	case <-time.After(4 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("the command did not start within 4 minutes")
	}
	time.Sleep(time.Second) // the committer syncs continuously; give it a beat
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := false
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), "qemu-system") && strings.Contains(string(b), "path="+ws+",") {
				left = true
			}
		}
		if !left {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("QEMU outlived the killed capsem run by 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	out, err := exec.Command(capsemBin, "sessions", "--json", "--data", data).Output()
	if err != nil {
		t.Fatalf("capsem sessions after the kill: %v", err)
	}
	var sessions []struct {
		ID      string  `json:"id"`
		EndedAt *string `json:"ended_at"`
		Crashed bool    `json:"crashed"`
		Events  int64   `json:"events"`
	}
	if err := json.Unmarshal(out, &sessions); err != nil || len(sessions) != 1 {
		t.Fatalf("sessions after the kill: %v\n%s", err, out)
	}
	if s := sessions[0]; s.EndedAt != nil || !s.Crashed || s.Events == 0 {
		t.Errorf("the killed session: ended_at %v, crashed %v, %d events; want no end, marked crashed, and its events", s.EndedAt, s.Crashed, s.Events)
	}
	db := exportRun(t, data, sessions[0].ID)
	if got := queryStrings(t, db, `SELECT qname FROM dns_events`); !strings.Contains(strings.Join(got, " "), "api.anthropic.com") {
		t.Errorf("dns_events of the killed session = %q: the query before the kill is lost", got)
	}
	r := capsemRun(t, runOpts{data: data}, nil, "true")
	if r.code != 0 {
		t.Fatalf("the next run after a killed one: exit %d\n%s", r.code, r.stderr)
	}
}
