package store

import (
	"testing"
	"time"
)

// durableNow reads how far the writer's events are synced.
func (w *Writer) durableNow() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.durable
}

// TestCommitLingerGroupsABurst: with a linger, a burst of events is
// committed as one batch (durable goes from 0 to all of them, never in
// between), within about the linger.
func TestCommitLingerGroupsABurst(t *testing.T) {
	s, err := OpenWith(t.TempDir(), Options{CommitLinger: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := beginT(t, s, Session{ID: "burst"})
	start := time.Now()
	const n = 200
	for i := 0; i < n; i++ {
		w.Append(Event{DNS: &DNS{QName: "a.test", Decision: Allowed}})
	}
	seen := map[uint64]bool{}
	for d := w.durableNow(); d < n; d = w.durableNow() {
		seen[d] = true
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the burst was not durable after 5 s (at %d)", d)
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	for d := range seen {
		if d != 0 {
			t.Errorf("durable stopped at %d of %d: the burst was split across commits", d, n)
		}
	}
	if took < 90*time.Millisecond || took > 2*time.Second {
		t.Errorf("the burst became durable after %v, want about the 100 ms linger", took)
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
}

// TestCommitLingerCutShort: Sync and End do not wait out the linger.
func TestCommitLingerCutShort(t *testing.T) {
	s, err := OpenWith(t.TempDir(), Options{CommitLinger: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := beginT(t, s, Session{ID: "sync"})
	for _, c := range []struct {
		why string
		do  func() error
	}{
		{"Sync", w.Sync},
		{"End", func() error { return w.End(nil) }},
	} {
		w.Append(Event{DNS: &DNS{QName: "a.test", Decision: Allowed}})
		start := time.Now()
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.why, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s took %v: it waited out the 10 s linger", c.why, took)
		}
	}
	sess, err := s.Session("sync")
	if err != nil || sess.Counts.Events != 2 || sess.EndedAt.IsZero() {
		t.Errorf("after End: %+v, %v", sess.Counts, err)
	}
}

// TestNoLinger: a negative linger commits at once, as before lingering
// existed (the first event of a burst is durable well within 100 ms).
func TestNoLinger(t *testing.T) {
	s, err := OpenWith(t.TempDir(), Options{CommitLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := beginT(t, s, Session{ID: "now"})
	start := time.Now()
	w.Append(Event{DNS: &DNS{QName: "a.test", Decision: Allowed}})
	for w.durableNow() < 1 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("not durable after 5 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("durable after %v with no linger", took)
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
}
