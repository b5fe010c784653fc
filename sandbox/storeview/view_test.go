package storeview

import (
	"testing"
	"time"

	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/ui"
)

// capsem ui reads through a View.
var _ ui.LiveSource = (*View)(nil)

// A View that closes when idle lists a session that ended in its own
// store (moving it into the main store first), and then lets go of the
// main store, so that the next run's end can move its session in.
func TestViewMergesAndLetsGoWhenIdle(t *testing.T) {
	for _, c := range []struct {
		o    Options
		held bool
		why  string
	}{
		{Options{}, true, "sessions, inspect, export: held until Close"},
		{Options{IdleClose: 50 * time.Millisecond, Refresh: time.Second}, false, "ui: let go when idle"},
	} {
		data := t.TempDir()
		rs, err := sessionstore.Open(data, store.Session{Command: []string{"true"}}, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		id := rs.ID()
		code := 0
		if err := rs.End(&code); err != nil {
			t.Fatal(err)
		}
		v, err := Open(data, c.o)
		if err != nil {
			t.Fatal(err)
		}
		list, err := v.Sessions()
		if err != nil || len(list) != 1 || list[0].ID != id || v.Live(id) {
			t.Errorf("%s: %v, %v; want the one finished session %s", c.why, list, err, id)
		}
		time.Sleep(200 * time.Millisecond)
		st, err := store.Open(data)
		if held := err != nil; held != c.held {
			t.Errorf("%s: the main store held after idle: %v (%v), want %v", c.why, held, err, c.held)
		}
		if st != nil {
			st.Close()
		}
		v.Close()
	}
}
