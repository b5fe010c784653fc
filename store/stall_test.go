package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStall: a commit that does not complete (a disk that stopped
// answering) does not block Append for good: after stallAfter, Admit
// refuses and Appends that find the queue full count their events instead
// of waiting; when the commit completes, the gap is written and everything
// queued is durable.
func TestStall(t *testing.T) {
	captureLog(t)
	defer func(d time.Duration, n int) { stallAfter, maxBatchEvents = d, n }(stallAfter, maxBatchEvents)
	stallAfter, maxBatchEvents = 200*time.Millisecond, 8
	g := newGateFS()
	opt := newFakeDisk(1 << 30).opts(0)
	opt.fs = g
	s, err := OpenWith(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := beginT(t, s, Session{ID: "st"})
	w.Append(Event{DNS: &DNS{QName: "before"}})
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}

	g.hold.Store(true)
	w.Append(Event{DNS: &DNS{QName: "stuck"}}) // its commit's sync waits
	waitFor(t, "the committer to take the batch", func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.inFlight > 0 })
	done := make(chan struct{})
	go func() {
		for range 100 { // 8 fill the next batch; the rest find it full
			w.Append(Event{DNS: &DNS{QName: "during"}})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * stallAfter):
		g.release()
		t.Fatal("Append blocked on a stalled commit")
	}
	err = w.Admit()
	if !errors.Is(err, ErrNotRecording) || !strings.Contains(err.Error(), "has not completed") {
		t.Errorf("Admit while stalled: %v", err)
	}

	g.release()
	waitFor(t, "Admit after the stall", func() bool { return w.Admit() == nil })
	w.Append(Event{DNS: &DNS{QName: "after"}})
	if err := w.End(nil); err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Errorf("End: %v, want the events held during the stall reported", err)
	}
	var during, held int64
	var order []string
	for _, e := range collect(t, s, "st") {
		switch {
		case e.DNS != nil && e.DNS.QName == "during":
			during++
		case e.DNS != nil:
			order = append(order, e.DNS.QName)
		case e.Recording != nil && e.Recording.State == RecordingUnstored:
			held += e.Recording.Count
			order = append(order, "unstored")
		}
	}
	if during+held != 100 || during != int64(maxBatchEvents) {
		t.Errorf("%d stored + %d held of the 100 appended during the stall, want %d stored (one batch) and the rest held", during, held, maxBatchEvents)
	}
	if got := strings.Join(order, " "); got != "before stuck unstored after" {
		t.Errorf("order %q", got)
	}
}
