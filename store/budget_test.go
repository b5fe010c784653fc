package store

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestBudgetOf(t *testing.T) {
	for _, c := range []struct {
		max, budget, allowance int64
		why                    string
	}{
		{0, DefaultMaxSessionBytes, 16 << 20, "zero means the default, 1 GiB, whose allowance is capped at 16 MiB"},
		{-1, 0, 0, "negative means no limit"},
		{64 << 10, 64 << 10, 4 << 10, "a small budget gets a sixteenth of it"},
		{1 << 40, 1 << 40, 16 << 20, "a huge budget's allowance stays 16 MiB: refusals are small"},
		{1, 1, 0, "a one-byte budget: only the first event, then refusals are counted"},
	} {
		b, a := budgetOf(c.max)
		if b != c.budget || a != c.allowance {
			t.Errorf("budgetOf(%d) = %d, %d; want %d, %d: %s", c.max, b, a, c.budget, c.allowance, c.why)
		}
	}
}

// TestBudget: a session that stores its byte budget makes Admit refuse,
// records that once (in the log and in its own record), goes on storing
// the allowance, then counts events instead of storing them, and at End
// writes how many it did not store, as a recording event and as Lost.
func TestBudget(t *testing.T) {
	s, err := OpenWith(t.TempDir(), Options{MaxSessionBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := beginT(t, s, Session{ID: "b"})
	ev := Event{DNS: &DNS{QName: "flood.test", QType: "A", Decision: Denied, Reason: "denied-name", Answer: "NXDOMAIN"}}
	size := int64(len(appendEvent(nil, &ev)) + w.keyLen())

	appended := 0
	for w.Admit() == nil {
		w.Append(ev)
		appended++
		if appended > 1<<20 {
			t.Fatal("Admit never refused")
		}
	}
	err = w.Admit()
	if !errors.Is(err, ErrNotRecording) || !strings.Contains(err.Error(), "--max-session-bytes") || !strings.Contains(err.Error(), "session b") {
		t.Fatalf("Admit past the budget: %v", err)
	}
	if want := (64<<10)/size + 1; int64(appended) > want {
		t.Errorf("%d events of %d bytes before Admit refused a 64 KiB budget, want at most %d", appended, size, want)
	}
	// The allowance, 4 KiB, is stored; the rest is counted.
	const more = 1000
	for range more {
		w.Append(ev)
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "not stored") {
		t.Errorf("Err after events were held: %v", err)
	}
	err = w.End(nil)
	if err == nil || !strings.Contains(err.Error(), "--max-session-bytes") {
		t.Errorf("End: %v, want it to say events were not stored past the budget", err)
	}
	sess, err := s.Session("b")
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, s, "b")
	checkSeqs(t, evs, "b")
	var dns, overBudget, unstored, held int64
	for _, e := range evs {
		switch {
		case e.DNS != nil:
			dns++
		case e.Recording != nil && e.Recording.State == RecordingOverBudget:
			overBudget++
		case e.Recording != nil && e.Recording.State == RecordingUnstored:
			unstored++
			held += e.Recording.Count
			if !strings.Contains(e.Recording.Detail, "dns ") || !strings.Contains(e.Recording.Detail, "--max-session-bytes") {
				t.Errorf("unstored detail %q does not say which kinds and why", e.Recording.Detail)
			}
		}
	}
	if overBudget != 1 || unstored != 1 {
		t.Errorf("%d over-budget and %d unstored events, want 1 and 1", overBudget, unstored)
	}
	if dns+held != int64(appended+more) {
		t.Errorf("%d stored + %d held = %d, want every one of the %d appended", dns, held, dns+held, appended+more)
	}
	if sess.Counts.Lost != held || held == 0 {
		t.Errorf("Counts.Lost = %d, want the %d held", sess.Counts.Lost, held)
	}
	if b := sess.Counts.Bytes; b < 64<<10 || b > 64<<10+4<<10+1024 {
		t.Errorf("Counts.Bytes = %d, want the budget plus at most the allowance and the recording events", b)
	}
	if sess.Counts.Events != int64(len(evs)) {
		t.Errorf("Counts.Events = %d, %d events stored", sess.Counts.Events, len(evs))
	}
}

// TestBudgetOnDisk measures what a session takes on disk against the bytes
// its budget counts. The files hold about the counted bytes (the
// write-ahead log the same bytes until the memtable is flushed, the flushed
// tables less, compressed); what is allocated adds pebble's preallocation
// of each write-ahead log (110 % of the memtable, 4.4 MiB at 4 MiB; this
// bound allows for memtables up to 32 MiB) for the live log and the ones
// kept for reuse — a fixed cost, not a share of the budget, which the disk
// reserve's floor (64 MiB) is sized to absorb.
func TestBudgetOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	dir := t.TempDir()
	s, err := OpenWith(dir, Options{MaxSessionBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := beginT(t, s, Session{ID: "size"})
	evs := benchEvents()
	for i := 0; w.Err() == nil; i++ {
		w.Append(evs[i%len(evs)])
		if i%4096 == 0 {
			w.mu.Lock()
			b := w.bytes
			w.mu.Unlock()
			if b >= 64<<20 {
				break
			}
		}
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	sess, _ := s.Session("size")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, alloc, logs := dirSize(t, dir)
	counted := float64(sess.Counts.Bytes)
	t.Logf("%d events, %.1f MiB counted; files %.1f MiB (%.2fx), allocated %.1f MiB of which %d write-ahead logs",
		sess.Counts.Events, counted/MiB, float64(files)/MiB, float64(files)/counted, float64(alloc)/MiB, logs)
	if r := float64(files) / counted; r > 1.25 {
		t.Errorf("the session's files take %.2fx its counted bytes: the budget's comment is wrong", r)
	}
	if extra := alloc - files; extra > int64(logs)*36*MiB {
		t.Errorf("%.1f MiB allocated beyond the files: more than the preallocation of %d logs", float64(extra)/MiB, logs)
	}
}

// dirSize returns the apparent size of dir's files, the space allocated to
// them, and how many write-ahead logs there are.
func dirSize(t *testing.T, dir string) (files, alloc int64, logs int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || e.IsDir() {
			continue
		}
		files += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			alloc += st.Blocks * 512
		}
		if strings.HasSuffix(e.Name(), ".log") {
			logs++
		}
	}
	return files, alloc, logs
}

// BenchmarkFreeSpace is the cost of one reading of the free space (statfs),
// which the store takes at most every diskCheckEvery.
func BenchmarkFreeSpace(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := freeSpace(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmit is the cost of Admit, which the netstack and the MITM
// call before every flow and request.
func BenchmarkAdmit(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.Begin(Session{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Admit(); err != nil {
			b.Fatal(err)
		}
	}
}
