package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

const MiB = 1 << 20

// fakeDisk is an injectable free-space reading.
type fakeDisk struct{ free atomic.Uint64 }

func (d *fakeDisk) set(n uint64)                { d.free.Store(n) }
func (d *fakeDisk) read(string) (uint64, error) { return d.free.Load(), nil }
func newFakeDisk(n uint64) *fakeDisk            { d := &fakeDisk{}; d.set(n); return d }
func (s *Store) recheckDisk()                   { s.disk.mu.Lock(); s.disk.next = time.Time{}; s.disk.mu.Unlock() }
func (d *fakeDisk) opts(minFree int64) Options {
	return Options{MinFreeDisk: minFree, freeSpace: d.read}
}
func (d *fakeDisk) open(t *testing.T, minFree int64) *Store {
	t.Helper()
	s, err := OpenWith(t.TempDir(), d.opts(minFree))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// logCapture collects slog records of level Warn and above.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCapture) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }
func (l *logCapture) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

func captureLog(t *testing.T) *logCapture {
	l := &logCapture{}
	old := slog.Default()
	slog.SetDefault(slog.New(l))
	t.Cleanup(func() { slog.SetDefault(old) })
	return l
}

// TestDiskStates walks the free space down and up through the reserve and
// the floor, with the margin that keeps a hovering disk from flapping.
func TestDiskStates(t *testing.T) {
	d := newFakeDisk(0)
	w := newDiskWatch("/data", 128*MiB, d.read) // floor 32 MiB, margin 8 MiB
	now := time.Now()
	for i, c := range []struct {
		free uint64
		want diskState
		why  string
	}{
		{1 << 30, diskOK, "plenty"},
		{129 * MiB, diskOK, "just above the reserve"},
		{127 * MiB, diskLow, "below the reserve: Admit refuses, events are written"},
		{133 * MiB, diskLow, "above the reserve but within the margin: still low"},
		{137 * MiB, diskOK, "past the margin: admit again"},
		{31 * MiB, diskFull, "below the floor: nothing written"},
		{39 * MiB, diskFull, "above the floor but within the margin: still full"},
		{41 * MiB, diskLow, "past the floor's margin, below the reserve: write again, still refuse"},
		{20 * MiB, diskFull, "down again"},
		{500 * MiB, diskOK, "all the way up at once"},
	} {
		d.set(c.free)
		now = now.Add(diskCheckEvery)
		if got, _ := w.check(now, 0); got != c.want {
			t.Errorf("step %d: %d MiB free: %v, want %v: %s", i, c.free/MiB, got, c.want, c.why)
		}
	}
	// Readings are taken at most every diskCheckEvery, unless enough bytes
	// were appended meanwhile.
	d.set(1 * MiB)
	if got, _ := w.check(now.Add(time.Millisecond), 100); got != diskOK {
		t.Errorf("re-read the free space within %v after 100 bytes", diskCheckEvery)
	}
	if got, _ := w.check(now.Add(2*time.Millisecond), diskCheckBytes); got != diskFull {
		t.Errorf("did not re-read the free space after %d bytes", diskCheckBytes)
	}
	// Off: thresholds are not applied.
	off := newDiskWatch("/data", -1, d.read)
	if got, _ := off.check(now, 0); got != diskOK {
		t.Errorf("MinFreeDisk < 0: %v, want ok", got)
	}
}

// TestDiskLowAndFull: below the reserve Admit refuses and says why and what
// to do while events are still written; below the floor events are counted,
// not written; when space returns the gap is written as one unstored
// event, then writing and admitting resume. Each transition is logged once.
func TestDiskLowAndFull(t *testing.T) {
	logs := captureLog(t)
	d := newFakeDisk(1 << 30)
	s := d.open(t, 100*MiB) // floor 25 MiB, margin 6.25 MiB
	w := beginT(t, s, Session{ID: "d"})
	dns := func(name string) Event { return Event{DNS: &DNS{QName: name, Decision: Denied}} }
	step := func(free uint64) { d.set(free); s.recheckDisk() }

	w.Append(dns("ok-1"))
	if err := w.Admit(); err != nil {
		t.Fatalf("Admit with 1 GiB free: %v", err)
	}
	step(50 * MiB)
	err := w.Admit()
	if !errors.Is(err, ErrNotRecording) {
		t.Fatalf("Admit with 50 MiB free: %v", err)
	}
	for _, want := range []string{s.Dir(), "50.0 MiB free", "100.0 MiB", "--min-free-disk", "free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Admit's error %q does not mention %q", err, want)
		}
	}
	w.Append(dns("low-1")) // still written
	step(10 * MiB)
	if err := w.Admit(); !errors.Is(err, ErrNotRecording) {
		t.Errorf("Admit below the floor: %v", err)
	}
	for range 100 {
		w.Append(dns("full"))
	}
	step(28 * MiB) // within the floor's margin: still held
	w.Append(dns("full"))
	step(60 * MiB) // low: written again, the gap first
	w.Append(dns("low-2"))
	if err := w.Admit(); !errors.Is(err, ErrNotRecording) {
		t.Errorf("Admit with 60 MiB free: %v", err)
	}
	step(1 << 30)
	if err := w.Admit(); err != nil {
		t.Errorf("Admit once space returned: %v", err)
	}
	w.Append(dns("ok-2"))
	if err := w.Sync(); err == nil || !strings.Contains(err.Error(), "101 events were counted but not stored") {
		t.Errorf("Sync: %v, want it to say 101 events were not stored", err)
	}
	if err := w.End(nil); err == nil {
		t.Error("End: nil, want the unstored events reported")
	}

	var got []string
	for _, e := range collect(t, s, "d") {
		switch {
		case e.DNS != nil:
			got = append(got, e.DNS.QName)
		case e.Recording != nil:
			got = append(got, e.Recording.State)
			if e.Recording.State == RecordingUnstored && (e.Recording.Count != 101 || !strings.Contains(e.Recording.Detail, "dns 101") ||
				!strings.Contains(e.Recording.Detail, "was full")) {
				t.Errorf("unstored event %+v", e.Recording)
			}
		}
	}
	want := "ok-1 disk-low low-1 unstored disk-low low-2 resumed ok-2"
	if strings.Join(got, " ") != want {
		t.Errorf("events %q, want %q", strings.Join(got, " "), want)
	}
	sess, _ := s.Session("d")
	if sess.Counts.Lost != 101 {
		t.Errorf("Counts.Lost = %d, want 101", sess.Counts.Lost)
	}
	// ok → low → full → low → ok: two transitions into low, one into full.
	for sub, n := range map[string]int{"less than the 100.0 MiB kept in reserve": 2, "events are counted, not written": 1, "101 events not stored": 1} {
		if c := logs.count(sub); c != n {
			t.Errorf("%d log lines with %q, want %d", c, sub, n)
		}
	}
}

// TestBeginRefusedOnALowDisk: a session does not start on a disk below the
// reserve: it could not be admitted anything.
func TestBeginRefusedOnALowDisk(t *testing.T) {
	d := newFakeDisk(100 * MiB)
	s := d.open(t, 0) // the default reserve, 256 MiB; its floor, 64 MiB
	_, err := s.Begin(Session{ID: "x"})
	if err == nil || !strings.Contains(err.Error(), "--min-free-disk") || !strings.Contains(err.Error(), s.Dir()) {
		t.Fatalf("Begin with 100 MiB free: %v", err)
	}
	d.set(1 << 30)
	s.recheckDisk()
	if _, err := s.Begin(Session{ID: "x"}); err != nil {
		t.Fatalf("Begin with 1 GiB free: %v", err)
	}
}

// gateFS is the real filesystem, except that while full is set every write
// fails with ENOSPC, as a full disk's would, and while hold is set the
// write-ahead log's syncs wait.
type gateFS struct {
	vfs.FS
	full atomic.Bool
	hold atomic.Bool
	mu   sync.Mutex
	cond *sync.Cond
}

func newGateFS() *gateFS {
	g := &gateFS{FS: vfs.Default}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gateFS) release() {
	g.mu.Lock()
	g.hold.Store(false)
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *gateFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &gateFile{File: f, g: g, wal: strings.HasSuffix(name, ".log")}, nil
}

func (g *gateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if g.full.Load() {
		return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	f, err := g.FS.Create(name, c)
	return g.wrap(f, name, err)
}

func (g *gateFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(old, name, c)
	return g.wrap(f, name, err)
}

func (g *gateFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, c, o...)
	return g.wrap(f, name, err)
}

type gateFile struct {
	vfs.File
	g   *gateFS
	wal bool
}

func (f *gateFile) Write(p []byte) (int, error) {
	if f.g.full.Load() {
		return 0, &os.PathError{Op: "write", Path: "gate", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f *gateFile) WriteAt(p []byte, off int64) (int, error) {
	if f.g.full.Load() {
		return 0, &os.PathError{Op: "write", Path: "gate", Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

func (f *gateFile) Sync() error {
	if f.wal {
		f.g.mu.Lock()
		for f.g.hold.Load() {
			f.g.cond.Wait()
		}
		f.g.mu.Unlock()
	}
	return f.File.Sync()
}

func (f *gateFile) SyncData() error { return f.Sync() }

func (f *gateFile) SyncTo(n int64) (bool, error) {
	if err := f.Sync(); err != nil {
		return false, err
	}
	return true, nil
}

// TestENOSPCWaitsForSpace: a write-ahead-log write that meets ENOSPC (the
// disk filled between two readings, or it is not watched) does not stop the
// process: pebble's write waits while Admit refuses and Append counts
// events, and it completes once space returns; nothing synced is lost.
func TestENOSPCWaitsForSpace(t *testing.T) {
	logs := captureLog(t)
	g := newGateFS()
	d := newFakeDisk(1 << 30)
	opt := d.opts(-1) // not watched: only ENOSPC tells
	opt.fs = g
	s, err := OpenWith(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := beginT(t, s, Session{ID: "e"})
	w.Append(Event{DNS: &DNS{QName: "before"}})
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}

	g.full.Store(true)
	d.set(0)
	w.Append(Event{DNS: &DNS{QName: "in-flight"}}) // its commit meets ENOSPC and waits
	waitFor(t, "Admit to refuse", func() bool { return errors.Is(w.Admit(), ErrNotRecording) })
	if err := w.Admit(); !strings.Contains(err.Error(), "is full") {
		t.Errorf("Admit on a full disk: %v", err)
	}
	done := make(chan struct{})
	go func() {
		for range 50 {
			w.Append(Event{DNS: &DNS{QName: "held"}}) // must not block
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Append blocked while the disk was full")
	}

	g.full.Store(false)
	d.set(1 << 30)
	if err := w.Sync(); err == nil || !strings.Contains(err.Error(), "50 events") {
		t.Errorf("Sync after space returned: %v, want the in-flight event durable and 50 held", err)
	}
	waitFor(t, "Admit to admit again", func() bool { return w.Admit() == nil })
	w.Append(Event{DNS: &DNS{QName: "after"}})
	w.End(nil)
	var got []string
	for _, e := range collect(t, s, "e") {
		if e.DNS != nil {
			got = append(got, e.DNS.QName)
		} else {
			got = append(got, e.Recording.State)
		}
	}
	if want := "before in-flight unstored resumed after"; strings.Join(got, " ") != want {
		t.Errorf("events %q, want %q", strings.Join(got, " "), want)
	}
	if logs.count("is full") != 1 {
		t.Errorf("the full disk was logged %d times, want once", logs.count("is full"))
	}
}

// TestENOSPCAtEndGivesUp: a session that ends while the disk stays full
// does not wait forever: after closeGrace the write fails, pebble's fatal
// error is taken by the store (the process goes on), End and Close return
// errors, and a copy of the directory opens with every event synced before.
func TestENOSPCAtEndGivesUp(t *testing.T) {
	captureLog(t)
	defer func(g time.Duration) { closeGrace = g }(closeGrace)
	closeGrace = 300 * time.Millisecond
	g := newGateFS()
	d := newFakeDisk(1 << 30)
	opt := d.opts(-1)
	opt.fs = g
	dir := t.TempDir()
	s, err := OpenWith(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	w := beginT(t, s, Session{ID: "f"})
	for range 10 {
		w.Append(Event{DNS: &DNS{QName: "synced"}})
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(t.TempDir(), "copy")
	g.full.Store(true)
	d.set(0)
	w.Append(Event{DNS: &DNS{QName: "never"}})
	waitFor(t, "Admit to refuse", func() bool { return errors.Is(w.Admit(), ErrNotRecording) })
	// What is on disk now is what a crash would leave.
	copyDir(t, dir, snapshot)

	ended := make(chan error, 1)
	go func() { ended <- w.End(nil) }()
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "fatal") {
			t.Errorf("End on a full disk: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("End waited forever on a full disk")
	}
	if err := w.Admit(); !errors.Is(err, ErrNotRecording) {
		t.Errorf("Admit after the fatal error: %v", err)
	}
	w.Append(Event{DNS: &DNS{QName: "after"}}) // counted, not blocking
	if err := s.Close(); err == nil {
		t.Error("Close of a broken store: nil")
	}

	c, err := Open(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for _, e := range collect(t, c, "f") {
		if e.DNS != nil && e.DNS.QName == "synced" {
			n++
		}
	}
	if n != 10 {
		t.Errorf("%d synced events in the reopened store, want 10", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == lockFileName || e.Name() == "LOCK" {
			continue
		}
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = io.Copy(&buf, in)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestENOSPCAtEndRecordGivesUp: with no write in flight, the disk fills and
// the session ends: End's own write of the end record meets ENOSPC. End
// and Close return errors after closeGrace instead of waiting for space.
func TestENOSPCAtEndRecordGivesUp(t *testing.T) {
	captureLog(t)
	defer func(g time.Duration) { closeGrace = g }(closeGrace)
	closeGrace = 300 * time.Millisecond
	g := newGateFS()
	d := newFakeDisk(1 << 30)
	opt := d.opts(-1)
	opt.fs = g
	s, err := OpenWith(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	w := beginT(t, s, Session{ID: "f"})
	w.Append(Event{DNS: &DNS{QName: "synced"}})
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	g.full.Store(true)
	d.set(0)
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"End", func() error { return w.End(nil) }},
		{"Close", s.Close},
	} {
		name, call := c.name, c.call
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "no space left") {
				t.Errorf("%s on a full disk: %v, want the ENOSPC it gave up on", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s waited forever on a full disk", name)
		}
	}
}

// TestOpenRefusedOnAFullDisk: opening to write on a disk below the floor
// fails at once, saying what to do, rather than leave pebble's replay of
// the write-ahead log waiting on ENOSPC; read-only opens still work.
func TestOpenRefusedOnAFullDisk(t *testing.T) {
	captureLog(t)
	dir := t.TempDir()
	d := newFakeDisk(1 << 30)
	s, err := OpenWith(dir, d.opts(0))
	if err != nil {
		t.Fatal(err)
	}
	w := beginT(t, s, Session{ID: "o"})
	w.Append(Event{DNS: &DNS{QName: "kept"}})
	w.End(nil)
	s.Close()
	for _, c := range []struct {
		minFree int64
		free    uint64
		why     string
	}{
		{0, 0, "default reserve: 0 B is below its 64 MiB floor"},
		{0, 60 * MiB, "just below the default floor"},
		{-1, 512 << 10, "thresholds off: below the 1 MiB pebble's replay needs"},
	} {
		d.set(c.free)
		s, err := OpenWith(dir, d.opts(c.minFree))
		if err == nil {
			s.Close()
			t.Errorf("%s: opened", c.why)
			continue
		}
		if !strings.Contains(err.Error(), "free space on that disk") {
			t.Errorf("%s: %v, want it to say what to do", c.why, err)
		}
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("read-only open on a full disk: %v", err)
	}
	r.Close()
}
