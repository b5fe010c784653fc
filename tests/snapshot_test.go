package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/sandbox"
)

// Snapshots, forks, suspend and resume of long-lived sandboxes, driven as a
// user does: capsem snapshot, start --from, suspend, start, against the
// real guest under QEMU.

// counterScript starts, detached from any session, a process that counts
// in its memory and writes the count to /root/count five times a second:
// a fork that restored the process carries on from the count it had. It
// runs in /root: a process whose working directory is in /workspace holds
// the workspace, which a snapshot unmounts.
const counterScript = `cd /root && setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /root/count; sleep 0.2; done' </dev/null >/dev/null 2>&1 &
sleep 0.5; cat /root/count`

// count reads sandbox name's counter.
func (e *sbEnv) count(name string) int {
	e.t.Helper()
	out := strings.TrimSpace(e.sh(name, "cat /root/count"))
	n, err := strconv.Atoi(out)
	if err != nil {
		e.t.Fatalf("%s: /root/count holds %q", name, out)
	}
	return n
}

// snapshotPolicy sends secret.test to the recording upstream on port.
func snapshotPolicy(t *testing.T, port int, caPath string) string {
	pol := filepath.Join(t.TempDir(), "policy.toml")
	err := os.WriteFile(pol, []byte(fmt.Sprintf(`
[network]
allow = ["secret.test"]

[upstream]
resolve = { "secret.test" = "127.0.0.1:%d" }
ca_files = [%q]
`, port, caPath)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// A process started before a snapshot keeps counting in two forks, each
// on its own; a file written before is in both and one written after in
// neither; the forks' kernels draw different random bytes and keep the
// host's time; a fork binds the source's placeholder to the real value it
// was started with, which reaches the bound host, and no saved file holds
// a real value. A fork without the secret's value is refused.
func TestSnapshotFork(t *testing.T) {
	e := newSBEnv(t)
	ca := newTestCA(t, "snapshot upstream CA")
	rec := &recorder{}
	port := startHTTPS(t, ca, rec, "secret.test")
	pol := snapshotPolicy(t, port, ca.pemPath)
	real1, real2 := "rv-src-"+strconv.FormatInt(time.Now().UnixNano(), 36), "rv-fork-"+strconv.FormatInt(time.Now().UnixNano()+1, 36)

	e.env = []string{"MY_TOKEN=" + real1}
	e.start("src", "--policy", pol, "--secret", "MY_TOKEN@secret.test")
	e.env = nil
	e.sh("src", counterScript)
	counter := strings.TrimSpace(e.sh("src", "pgrep -f 'i=0[;] while'"))
	e.sh("src", `echo before > /root/before; printenv MY_TOKEN > /root/ph`)
	ph := strings.TrimSpace(e.sh("src", "cat /root/ph"))
	if !strings.HasPrefix(ph, "capsem-secret-") {
		t.Fatalf("the guest's MY_TOKEN is %q, want a placeholder", ph)
	}
	r := e.must(0, nil, "snapshot", "--tag", "t1", "src")
	t.Logf("capsem snapshot: %v: %s", r.took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
	if strings.TrimSpace(r.stdout) != "src@t1" {
		t.Errorf("capsem snapshot printed %q, want src@t1", r.stdout)
	}
	atSnap := e.count("src")
	e.sh("src", "echo after > /root/after")
	// The source goes on: its workspace is mounted again and it counts.
	if out := e.sh("src", "echo hi > /workspace/from-src; cat /workspace/from-src"); out != "hi\n" {
		t.Errorf("the source's workspace after the snapshot: %q", out)
	}
	time.Sleep(2 * time.Second)
	if n := e.count("src"); n <= atSnap {
		t.Errorf("the source stopped counting after its snapshot: %d then %d", atSnap, n)
	}

	var list []struct {
		Tag       string `json:"tag"`
		SessionID string `json:"session_id"`
		Bytes     int64  `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(e.must(0, nil, "snapshots", "--json", "src").stdout), &list); err != nil || len(list) != 1 || list[0].Tag != "t1" || list[0].Bytes <= 0 || list[0].SessionID != e.ls()["src"].SessionID {
		t.Errorf("capsem snapshots --json src: %+v (%v)", list, err)
	}

	// A fork without the secret's real value is refused before it boots.
	if r := e.must(2, nil, "start", "--ca-dir", e.caDir, "--from", "src@t1", "nosecret"); !strings.Contains(r.stderr, "MY_TOKEN") {
		t.Errorf("a fork without MY_TOKEN says %q", r.stderr)
	}

	// What a person answered "always" in the source is the forks' too.
	if err := os.WriteFile(filepath.Join(e.data, "sandboxes", "src", "policy-asked.toml"), []byte("[network]\nallow = [\"kept.test\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	e.env = []string{"MY_TOKEN=" + real2}
	for _, f := range []string{"f1", "f2"} {
		r := e.must(0, nil, "start", "--ca-dir", e.caDir, "--from", "src@t1", f)
		if asked := e.ls()[f].Asked; len(asked) != 1 || asked[0] != "kept.test" {
			t.Errorf("%s's asked entries: %q, want the source's kept.test", f, asked)
		}
		t.Logf("capsem start --from src@t1 %s: %v", f, r.took.Round(time.Millisecond))
		// The clock first: the guest's is set when it is restored, and
		// under TCG its tick-based clocksource (refined-jiffies) loses
		// time while the host is loaded, so later it may lag.
		guest, _ := strconv.ParseInt(strings.TrimSpace(e.sh(f, "date +%s")), 10, 64)
		if d := time.Now().Unix() - guest; d > 3 || d < -3 {
			t.Errorf("%s's clock is %d s off the host's right after its start", f, d)
		}
	}
	e.env = nil
	rand := map[string]string{}
	for _, f := range []string{"f1", "f2"} {
		if st := e.state(f); st != "running" {
			t.Fatalf("%s is %s", f, st)
		}
		// The counting process is the source's, restored: the same pid,
		// counting on from where it was.
		if pid := strings.TrimSpace(e.sh(f, "pgrep -f 'i=0[;] while'")); pid != counter {
			t.Errorf("%s's counter has pid %q, the source's %q: not the restored process", f, pid, counter)
		}
		n1 := e.count(f)
		if n1 < atSnap {
			t.Errorf("%s's counter is at %d, below the snapshot's %d", f, n1, atSnap)
		}
		time.Sleep(time.Second)
		if n2 := e.count(f); n2 <= n1 {
			t.Errorf("%s's counter does not go on: %d then %d", f, n1, n2)
		}
		if out := e.sh(f, "cat /root/before; ls /root/after 2>&1 || true"); !strings.HasPrefix(out, "before\n") || !strings.Contains(out, "No such file") {
			t.Errorf("%s: the file written before the snapshot must be there and the one after not: %q", f, out)
		}
		rand[f] = e.sh(f, "head -c 32 /dev/urandom | od -An -tx1")
		mark := "fork-" + f
		e.sh(f, `curl -sS -o /dev/null -H "X-Key: $(cat /root/ph)" https://secret.test/rec?m=`+mark)
		got := rec.with(mark)
		if len(got) != 1 || got[0].header.Get("X-Key") != real2 {
			t.Errorf("%s: the bound host saw %v, want X-Key = the fork's real value", f, got)
		}
	}
	// Each counts on its own: stopped in f1, it goes on in f2.
	e.sh("f1", "pkill -f 'i=0[;] while'; sleep 0.3")
	stopped, before := e.count("f1"), e.count("f2")
	time.Sleep(time.Second)
	if n := e.count("f1"); n != stopped {
		t.Errorf("f1's counter moved after it was stopped: %d then %d", stopped, n)
	}
	if n := e.count("f2"); n <= before {
		t.Errorf("f2's counter stopped with f1's: %d then %d", before, n)
	}
	if rand["f1"] == rand["f2"] {
		t.Errorf("two forks read the same /dev/urandom bytes: %s", rand["f1"])
	}
	if e.ls()["f1"].SessionID == e.ls()["src"].SessionID {
		t.Error("a fork shares its source's session")
	}

	// No saved file holds a real value: the guest never had one. The
	// RAM is compressed: it is searched expanded, and the placeholder the
	// guest printed is found there (else the search proves nothing).
	images := 0
	for _, dir := range []string{filepath.Join(e.data, "sandboxes", "src", "snapshots"), filepath.Join(e.data, "sandboxes")} {
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() || !strings.Contains(p, "snapshots") && !strings.Contains(p, "suspended") {
				return nil
			}
			if info.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", p, info.Mode().Perm())
			}
			search := p
			if filepath.Base(p) == sandbox.RAMImageFile {
				images++
				search = expandRAMImage(t, p)
				if found, err := sparseContains(search, ph); err != nil || !found {
					t.Errorf("%s expanded does not hold the guest's placeholder %s (%v): the search below proves nothing", p, ph, err)
				}
			}
			if found, err := sparseContains(search, real1, real2); err != nil || found {
				t.Errorf("%s holds a real secret value (or could not be read: %v)", p, err)
			}
			return nil
		})
	}
	if images == 0 {
		t.Errorf("no %s in the snapshots: a snapshot's RAM is saved compressed", sandbox.RAMImageFile)
	}

	e.must(0, nil, "snapshot", "rm", "src", "t1")
	if r := e.must(0, nil, "snapshots", "src"); strings.Contains(r.stdout, "t1") {
		t.Errorf("capsem snapshot rm left it listed:\n%s", r.stdout)
	}
}

// Suspend saves the guest and stops the sandbox; ls says suspended; start
// resumes the same processes. A workspace a guest process holds blocks a
// snapshot, which names it. A saved guest from another capsem is refused,
// and --cold boots afresh.
func TestSnapshotSuspendResume(t *testing.T) {
	e := newSBEnv(t)
	e.start("sus")
	e.sh("sus", counterScript)
	pid := strings.TrimSpace(e.sh("sus", "pgrep -f 'i=0[;] while'"))

	// Busy: a process with its working directory in /workspace.
	e.sh("sus", "cd /workspace && setsid sleep 600 </dev/null >/dev/null 2>&1 &")
	r := e.must(1, nil, "snapshot", "sus")
	if !strings.Contains(r.stderr, "sleep") || !strings.Contains(r.stderr, "workspace") {
		t.Errorf("a snapshot of a busy workspace says %q; want it to name the sleep holding /workspace", r.stderr)
	}
	if out := e.sh("sus", "echo ok > /workspace/still; cat /workspace/still"); out != "ok\n" {
		t.Errorf("after a refused snapshot the workspace reads %q", out)
	}
	e.sh("sus", "pkill -f '^sleep 600'; sleep 0.3")

	before := e.count("sus")
	r = e.must(0, nil, "suspend", "sus")
	t.Logf("capsem suspend: %v: %s", r.took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
	if st := e.state("sus"); st != "suspended" {
		t.Fatalf("ls says %q after suspend, want suspended", st)
	}
	if len(qemuOf(filepath.Join(e.data, "sandboxes", "sus"))) != 0 {
		t.Error("a QEMU of the suspended sandbox still runs")
	}
	time.Sleep(time.Second)
	r = e.start("sus")
	if got := strings.TrimSpace(e.sh("sus", "pgrep -f 'i=0[;] while'")); got != pid {
		t.Errorf("the counter's pid is %q after resume, was %q: not the same process", got, pid)
	}
	n := e.count("sus")
	if n < before || n > before+20 {
		t.Errorf("the counter is at %d after resume, %d before the suspend", n, before)
	}
	if out := e.sh("sus", "cat /workspace/still"); out != "ok\n" {
		t.Errorf("the workspace after resume reads %q", out)
	}

	// A saved guest another capsem wrote is refused, with what to do.
	e.must(0, nil, "suspend", "sus")
	meta := filepath.Join(e.data, "sandboxes", "sus", "suspended", "meta.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	capsem := m["capsem"]
	m["capsem"] = "capsem v0.0.0-another"
	b, _ = json.Marshal(m)
	if err := os.WriteFile(meta, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.must(1, nil, "start", "--ca-dir", e.caDir, "sus")
	if !strings.Contains(r.stderr, "another") || !strings.Contains(r.stderr, "--cold") {
		t.Errorf("a foreign saved guest's start says %q", r.stderr)
	}
	m["capsem"] = capsem
	m["machine"] = "qemu 0.0.0 microvm accel=tcg cpu=max smp=2 mem=2048M devices=other"
	b, _ = json.Marshal(m)
	_ = os.WriteFile(meta, b, 0o600)
	r = e.must(1, nil, "start", "--ca-dir", e.caDir, "sus")
	if !strings.Contains(r.stderr, "another machine") {
		t.Errorf("a saved guest of another machine's start says %q", r.stderr)
	}
	e.start("sus", "--cold")
	if out := e.sh("sus", "pgrep -f 'i=0[;] while' || echo none"); out != "none\n" {
		t.Errorf("after --cold the old counter runs: %q", out)
	}
}

// sparseContains reports whether the file at path holds any of needles in
// its data (its holes, most of a guest's RAM and disk, are skipped).
// expandRAMImage expands a snapshot's compressed RAM into a sparse file
// of the test's.
func expandRAMImage(t *testing.T, p string) string {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "ram")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := hypervisor.LoadRAMImage(out, p); err != nil {
		t.Fatalf("expand %s: %v", p, err)
	}
	return out.Name()
}

func sparseContains(path string, needles ...string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	const chunk, overlap = 4 << 20, 256
	buf := make([]byte, chunk+overlap)
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return false, err
		}
		for p := data; p < hole; p += chunk {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), hole-p)], p)
			if err != nil && n == 0 {
				return false, err
			}
			for _, nd := range needles {
				if bytes.Contains(buf[:n], []byte(nd)) {
					return true, nil
				}
			}
		}
		off = hole
	}
	return false, nil
}
