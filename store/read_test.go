package store

import (
	"math"
	"testing"
)

// A reader that has seen events up to a sequence number reads on from the
// next one, while the session is still being written.
func TestEventsAfter(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{})
	for i := range 10 {
		w.Append(Event{Net: &Net{Port: uint16(i + 1), Decision: Denied}})
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after uint64
		first uint64
		n     int
		why   string
	}{
		{0, 1, 10, "0 is from the start"},
		{3, 4, 7, "from the one after"},
		{10, 0, 0, "nothing after the last"},
		{math.MaxUint64, 0, 0, "the largest sequence number has no successor"},
	} {
		var got []uint64
		if err := s.EventsAfter(w.ID(), c.after, func(ev Event) error { got = append(got, ev.Seq); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != c.n || (c.n > 0 && got[0] != c.first) {
			t.Errorf("EventsAfter(%d) = %v, want %d from %d (%s)", c.after, got, c.n, c.first, c.why)
		}
	}
}

// A checkpoint of a store being written opens read-only beside it, with
// every event synced before it.
func TestCheckpointWhileWriting(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir+"/live")
	w := beginT(t, s, Session{Sandbox: "box"})
	for i := range 100 {
		w.Append(Event{Net: &Net{Port: uint16(i + 1), Decision: Allowed}})
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(dir + "/copy"); err != nil {
		t.Fatal(err)
	}
	w.Append(Event{Net: &Net{Port: 999, Decision: Allowed}}) // after the copy
	ro, err := OpenReadOnly(dir + "/copy")
	if err != nil {
		t.Fatalf("open the checkpoint while the store is open: %v", err)
	}
	defer ro.Close()
	sess, err := ro.Session(w.ID())
	if err != nil || sess.Sandbox != "box" || !sess.EndedAt.IsZero() {
		t.Fatalf("the session in the copy: %+v, %v", sess, err)
	}
	if n := len(collect(t, ro, w.ID())); n != 100 {
		t.Errorf("the copy has %d events, want the 100 synced before it", n)
	}
	if err := s.Checkpoint(dir + "/copy"); err == nil {
		t.Error("a checkpoint into an existing directory succeeded")
	}
}
