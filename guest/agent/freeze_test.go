//go:build linux

package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/proto"
)

// fakeWorkspace is a Workspace whose mount and unmount are counted, not
// done: the tests run on the host, where nothing is mounted.
type fakeWorkspace struct {
	mu               sync.Mutex
	mounts, unmounts int
	unmountErr       error
}

func (f *fakeWorkspace) workspace(path string, deferred bool) *Workspace {
	return &Workspace{
		Path:     path,
		Deferred: deferred,
		Mount: func() (string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.mounts++
			return "fakefs", nil
		},
		Unmount: func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.unmountErr != nil {
				return f.unmountErr
			}
			f.unmounts++
			return nil
		},
	}
}

func (f *fakeWorkspace) counts() (mounts, unmounts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mounts, f.unmounts
}

// fdsUnder counts this process's descriptors on paths under dir.
func fdsUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if p, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && (p == dir || strings.HasPrefix(p, dir+"/")) {
			n++
		}
	}
	return n
}

func fileEvents(msgs []proto.Message) []string {
	var got []string
	for _, m := range msgs {
		if ev, ok := m.(proto.FileEvent); ok {
			got = append(got, describe(ev))
		}
	}
	return got
}

// Freeze stops the watcher — its pending events sent first, every
// descriptor it pinned under the workspace closed — then unmounts; Thaw
// mounts and watches again.
func TestFreezeStopsWatcherAndUnmounts(t *testing.T) {
	dir := t.TempDir()
	fw := &fakeWorkspace{}
	h := newHarness(t, Config{WatchDir: dir, Dir: dir, WatchDelay: time.Hour, Workspace: fw.workspace(dir, false)})
	must(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "pending.txt"), []byte("x"), 0o644))
	for deadline := time.Now().Add(5 * time.Second); fdsUnder(t, dir) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors under the workspace: the watcher did not pin its 3 directories", fdsUnder(t, dir))
		}
	}
	ctx := context.Background()
	if _, err := h.cl.Freeze(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	// The watcher's delay is an hour: these came out only because Freeze
	// flushed them before Frozen.
	expectEvents(t, h.takeEvents(), []string{"created a dir", "created a/b dir", "created pending.txt 1"})
	if n := fdsUnder(t, dir); n != 0 {
		t.Fatalf("%d descriptors under the workspace after Freeze, want 0", n)
	}
	if mounts, unmounts := fw.counts(); mounts != 0 || unmounts != 1 {
		t.Fatalf("mounts %d, unmounts %d after Freeze, want 0 and 1", mounts, unmounts)
	}
	must(t, os.WriteFile(filepath.Join(dir, "while-frozen.txt"), []byte("x"), 0o644))
	time.Sleep(200 * time.Millisecond)
	if got := fileEvents(h.takeEvents()); len(got) != 0 {
		t.Fatalf("file events while frozen: %v", got)
	}

	th, err := h.cl.Thaw(ctx, proto.Thaw{})
	if err != nil {
		t.Fatal(err)
	}
	if th.Workspace != dir || th.WSFS != "fakefs" || th.Uptime <= 0 || len(th.Warnings) != 0 {
		t.Fatalf("thawed %+v", th)
	}
	if mounts, unmounts := fw.counts(); mounts != 1 || unmounts != 1 {
		t.Fatalf("mounts %d, unmounts %d after Thaw, want 1 and 1", mounts, unmounts)
	}
	if n := fdsUnder(t, dir); n < 3 {
		t.Fatalf("%d descriptors under the workspace after Thaw: not watching again", n)
	}
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "echo hi > after.txt"}}, nil)
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("%+v", r)
	}
	expectEvents(t, h.takeEvents(), []string{"created after.txt 3"})
}

// syncBuffer is a bytes.Buffer safe for one writer and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Output written while frozen, and the session's end, are held and reach
// the same host, in order, after a Thaw that is not a restore.
func TestFreezeHoldsOutputUntilThaw(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	// The command goes on when a file appears: no host frame, which the
	// client holds while frozen, is needed to make it write.
	gate := filepath.Join(t.TempDir(), "go")
	s, err := h.cl.Exec(ctx, proto.Exec{Argv: []string{"sh", "-c", "echo one; while [ ! -e " + gate + " ]; do sleep 0.02; done; echo two; echo three >&2"}})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(&out, s.Stdout()); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(&errOut, s.Stderr()); copied <- struct{}{} }()
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "one\n" {
		if time.Now().After(deadline) {
			t.Fatalf("stdout %q before the freeze", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := h.cl.Freeze(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	// The command writes the rest and exits meanwhile.
	must(t, os.WriteFile(gate, nil, 0o644))
	time.Sleep(500 * time.Millisecond)
	select {
	case <-s.Done():
		e, err := s.Wait()
		t.Fatalf("the session ended while frozen: %+v %v, stdout %q", e, err, out.String())
	default:
	}
	if out.String() != "one\n" || errOut.String() != "" {
		t.Fatalf("output while frozen: %q %q", out.String(), errOut.String())
	}
	if _, err := h.cl.Thaw(ctx, proto.Thaw{}); err != nil {
		t.Fatal(err)
	}
	exit, err := waitTimeout(t, s, 10*time.Second)
	<-copied
	<-copied
	if err != nil || exit.Code != 0 || out.String() != "one\ntwo\n" || errOut.String() != "three\n" {
		t.Fatalf("after the thaw: exit %+v %v, stdout %q, stderr %q", exit, err, out.String(), errOut.String())
	}
}

// rawFreeze sends Freeze and reads up to the Frozen.
func rawFreeze(t *testing.T, c *rawHost) proto.Frozen {
	t.Helper()
	if err := c.Send(proto.Freeze{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	for {
		m := rawNext(t, c, 10*time.Second)
		if fr, ok := m.(proto.Frozen); ok {
			return fr
		}
	}
}

// rawNext is the next message from the agent, within d; nil when none.
func rawNext(t *testing.T, c *rawHost, d time.Duration) proto.Message {
	t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			t.Fatal("the connection ended")
		}
		return m
	case <-time.After(d):
		return nil
	}
}

func seed(t *testing.T) []byte {
	b := make([]byte, proto.MinSeed)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// After a restored Thaw the old host's session is killed and nothing of it
// reaches the new host — not the output it wrote while frozen, not its
// Exit — and the new host may reuse its id at once.
func TestThawRestoredDropsOldSessions(t *testing.T) {
	c := newRawHostConfig(t, Config{})
	if err := c.Send(proto.Exec{ID: 1, Argv: []string{"sh", "-c", "echo started; read x; echo late; exec sleep 600"}}); err != nil {
		t.Fatal(err)
	}
	var pid int
	var out string
	for pid == 0 || out != "started\n" {
		switch m := rawNext(t, c, 10*time.Second).(type) {
		case proto.Started:
			pid = m.PID
		case proto.Stdout:
			out += string(m.Data)
		case nil:
			t.Fatalf("no start: pid %d, stdout %q", pid, out)
		}
	}
	if fr := rawFreeze(t, c); fr.Refused != "" {
		t.Fatalf("frozen %+v", fr)
	}
	// The agent reads on while frozen: the command gets its stdin and
	// writes "late", which is held.
	if err := c.Send(proto.Stdin{ID: 1, Data: []byte("go\n")}); err != nil {
		t.Fatal(err)
	}
	if m := rawNext(t, c, 500*time.Millisecond); m != nil {
		t.Fatalf("the agent sent %v while frozen", m.Type())
	}

	// The guest, restored: a new host's first frame is a restored Thaw.
	if err := c.Send(proto.Thaw{Time: time.Now().UnixNano(), Seed: seed(t), Restored: true}); err != nil {
		t.Fatal(err)
	}
	if m := rawNext(t, c, 10*time.Second); m == nil || m.Type() != proto.TypeThawed {
		t.Fatalf("first frame after a restored thaw: %v, want thawed", m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the old session's process %d still runs after a restored thaw", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Session id 1 again, the new host's.
	if err := c.Send(proto.Exec{ID: 1, Argv: []string{"echo", "new"}}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	out = ""
	for {
		m := rawNext(t, c, 10*time.Second)
		if m == nil {
			t.Fatalf("no exit of the new session; got %v", seen)
		}
		seen = append(seen, m.Type().String())
		if o, ok := m.(proto.Stdout); ok {
			out += string(o.Data)
		}
		if e, ok := m.(proto.Exit); ok {
			if e.Code != 0 || out != "new\n" {
				t.Fatalf("new session 1: exit %+v, stdout %q (frames %v): the old session's must never arrive", e, out, seen)
			}
			break
		}
	}
	if m := rawNext(t, c, 500*time.Millisecond); m != nil {
		t.Fatalf("after the new session the agent sent %v: the old session's end must never arrive", m.Type())
	}
}

// An Exec while frozen is refused, in a frame held until the Thaw; the
// agent then runs commands again.
func TestExecRefusedWhileFrozen(t *testing.T) {
	c := newRawHostConfig(t, Config{})
	if fr := rawFreeze(t, c); fr.Refused != "" {
		t.Fatalf("frozen %+v", fr)
	}
	if err := c.Send(proto.Exec{ID: 5, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(proto.Ping{Seq: 3}); err != nil {
		t.Fatal(err)
	}
	if m := rawNext(t, c, 300*time.Millisecond); m != nil {
		t.Fatalf("the agent sent %v while frozen", m.Type())
	}
	if err := c.Send(proto.Thaw{Seed: seed(t)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		m := rawNext(t, c, 5*time.Second)
		if m == nil {
			t.Fatalf("after the thaw: %v", got)
		}
		got = append(got, m.Type().String())
		if e, ok := m.(proto.Error); ok && (e.ID != 5 || !strings.Contains(e.Msg, "snapshotted")) {
			t.Fatalf("refusal %+v", e)
		}
	}
	if strings.Join(got, " ") != "thawed error pong" {
		t.Fatalf("after the thaw: %v, want thawed, then the held refusal and pong in order", got)
	}
	if err := c.Send(proto.Exec{ID: 6, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if e := waitExit(t, c, 6); e.Code != 0 {
		t.Fatalf("exec after the thaw: %+v", e)
	}
}

// Thaw is answered in any state: not frozen, it sets the clock and
// reseeds; what fails is a warning, never a refusal.
func TestThawWhenNotFrozen(t *testing.T) {
	for _, c := range []struct {
		name      string
		seedLen   int
		reseedErr error
		clockErr  error
		warnings  []string
		why       string
	}{
		{"clean", 64, nil, nil, nil, "clock set, generator reseeded"},
		{"failures", 64, errors.New("operation not permitted"), errors.New("invalid argument"),
			[]string{"reseed the random generator: operation not permitted", "set the clock: invalid argument"},
			"an agent without the capability still thaws, and says what it could not do"},
		{"short seed", 8, nil, nil, []string{"a seed of 8 bytes from the host"}, "a short seed is used, and reported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var seeded []byte
			var clock time.Time
			h := newRawHostConfig(t, Config{
				Reseed: func(s []byte) error {
					mu.Lock()
					defer mu.Unlock()
					seeded = append([]byte(nil), s...)
					return c.reseedErr
				},
				SetClock: func(t time.Time) error {
					mu.Lock()
					defer mu.Unlock()
					clock = t
					return c.clockErr
				},
			})
			want := time.Unix(1900000000, 5)
			sd := make([]byte, c.seedLen)
			sd[0] = 0xa5
			if err := h.Send(proto.Thaw{Time: want.UnixNano(), Seed: sd}); err != nil {
				t.Fatal(err)
			}
			th, ok := rawNext(t, h, 5*time.Second).(proto.Thawed)
			if !ok {
				t.Fatal("no thawed")
			}
			mu.Lock()
			defer mu.Unlock()
			if !clock.Equal(want) || !bytes.Equal(seeded, sd) || th.Uptime <= 0 || th.Workspace != "" {
				t.Fatalf("clock %v, seeded %d bytes, thawed %+v (%s)", clock, len(seeded), th, c.why)
			}
			if len(th.Warnings) != len(c.warnings) {
				t.Fatalf("warnings %q, want %q (%s)", th.Warnings, c.warnings, c.why)
			}
			for i, w := range c.warnings {
				if !strings.Contains(th.Warnings[i], w) {
					t.Fatalf("warnings %q, want %q (%s)", th.Warnings, c.warnings, c.why)
				}
			}
		})
	}
}

// A busy workspace refuses the freeze, naming who holds it; the agent runs
// on as before, its watcher too.
func TestFreezeRefusedWhenBusy(t *testing.T) {
	dir := t.TempDir()
	fw := &fakeWorkspace{unmountErr: fmt.Errorf("unmount %s: %w", dir, unix.EBUSY)}
	h := newHarness(t, Config{WatchDir: dir, Dir: dir, WatchDelay: 50 * time.Millisecond, Workspace: fw.workspace(dir, false)})
	ctx := context.Background()
	s, err := h.cl.Exec(ctx, proto.Exec{Argv: []string{"sleep", "600"}}) // its cwd is the workspace
	if err != nil {
		t.Fatal(err)
	}
	defer s.Cancel(nil)
	fr, err := h.cl.Freeze(ctx, "test")
	if !errors.Is(err, proto.ErrBusy) || !strings.Contains(fr.Refused, "in use") {
		t.Fatalf("freeze of a busy workspace: %+v %v", fr, err)
	}
	holder := strconv.Itoa(s.PID()) + " sleep (cwd)"
	if !contains(fr.Holders, holder) || !strings.Contains(err.Error(), holder) {
		t.Fatalf("holders %q, error %v: want %q", fr.Holders, err, holder)
	}
	for _, hd := range fr.Holders {
		if strings.HasPrefix(hd, strconv.Itoa(os.Getpid())+" ") {
			t.Fatalf("the agent lists itself as a holder: %q", hd)
		}
	}
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "echo x > still-watched.txt"}}, nil)
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exec after a refused freeze: %+v", r)
	}
	expectEvents(t, h.takeEvents(), []string{"created still-watched.txt 2"})
}

// With the workspace deferred (capsem.wsdefer=1) nothing is watched until
// the first Thaw mounts it.
func TestWorkspaceDeferredUntilThaw(t *testing.T) {
	dir := t.TempDir()
	fw := &fakeWorkspace{}
	h := newHarness(t, Config{WatchDir: dir, WatchDelay: 50 * time.Millisecond, Workspace: fw.workspace(dir, true)})
	if n := fdsUnder(t, dir); n != 0 {
		t.Fatalf("%d descriptors under a deferred workspace", n)
	}
	ctx := context.Background()
	if _, err := h.cl.Freeze(ctx, "boot snapshot"); err != nil {
		t.Fatal(err)
	}
	if mounts, unmounts := fw.counts(); mounts != 0 || unmounts != 0 {
		t.Fatalf("mounts %d unmounts %d: a deferred workspace is not mounted, nothing to unmount", mounts, unmounts)
	}
	th, err := h.cl.Thaw(ctx, proto.Thaw{})
	if err != nil || th.Workspace != dir || th.WSFS != "fakefs" {
		t.Fatalf("thaw: %+v %v", th, err)
	}
	r := h.run(proto.Exec{Argv: []string{"sh", "-c", "echo x > " + filepath.Join(dir, "f")}}, nil)
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("%+v", r)
	}
	expectEvents(t, h.takeEvents(), []string{"created f 2"})
	// A second Thaw mounts nothing more.
	if th, err := h.cl.Thaw(ctx, proto.Thaw{}); err != nil || th.Workspace != "" {
		t.Fatalf("second thaw: %+v %v", th, err)
	}
	if mounts, _ := fw.counts(); mounts != 1 {
		t.Fatalf("%d mounts", mounts)
	}
}

// Holders finds what keeps a directory's filesystem busy, by process.
func TestHolders(t *testing.T) {
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("no /proc")
	}
	if os.Geteuid() != 0 {
		t.Skip("reading other processes' /proc entries needs root")
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	start := func(dir string, argv ...string) int {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		must(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}
	cwd := start(dir, "sleep", "600")
	fd := start("/", "sh", "-c", "exec 7<"+filepath.Join(dir, "f")+"; exec sleep 600")
	start("/", "sleep", "600") // holds nothing there
	self, err := os.Open(filepath.Join(dir, "f"))
	must(t, err)
	defer self.Close()

	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = Holders("/proc", dir, os.Getpid())
		if len(got) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // sh has not opened fd 7 yet
	}
	want := []string{strconv.Itoa(cwd) + " sleep (cwd)", strconv.Itoa(fd) + " sleep (fd 7)"}
	if cwd > fd {
		want[0], want[1] = want[1], want[0]
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("holders:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Not leaving itself out, the caller is listed too.
	if all := Holders("/proc", dir, -1); len(all) != 3 {
		t.Fatalf("holders, this process included: %q", all)
	}
	if got := Holders("/proc", filepath.Join(dir, "nothing-here"), os.Getpid()); len(got) != 0 {
		t.Fatalf("holders of an unused directory: %q", got)
	}
}

// AddEntropy feeds the kernel (root only: it needs CAP_SYS_ADMIN).
func TestAddEntropy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs CAP_SYS_ADMIN")
	}
	if err := AddEntropy(seed(t)); err != nil {
		t.Fatal(err)
	}
}
