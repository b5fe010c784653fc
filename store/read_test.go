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
