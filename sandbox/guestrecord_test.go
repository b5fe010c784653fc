package sandbox

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/store"
)

type memRecorder struct {
	mu  sync.Mutex
	evs []store.Event
}

func (m *memRecorder) Append(ev store.Event) {
	m.mu.Lock()
	m.evs = append(m.evs, ev)
	m.mu.Unlock()
}

func (m *memRecorder) Admit() error { return nil }

// A guest that reports file events without end gets its burst recorded,
// then one rate-limited event with the count; long paths are cut and
// counted; every event carries the host's time and the guest's claim.
func TestGuestRecordFileEvents(t *testing.T) {
	rec := &memRecorder{}
	g := newGuestRecord(rec, slog.New(slog.DiscardHandler))
	const sent = fsEventsBurst + 5000
	before := time.Now()
	for i := 0; i < sent; i++ {
		g.fileEvent(proto.FileEvent{Action: "created", Path: "f", Time: 1})
	}
	g.fileEvent(proto.FileEvent{Action: "created", Path: strings.Repeat("p", maxReportedPath+10)})
	g.flush()

	var fs, dropped, capped int64
	for _, ev := range rec.evs {
		switch {
		case ev.FS != nil:
			fs++
			if ev.Time.Before(before) || ev.FS.GuestTime.UnixNano() != 1 && ev.FS.Path == "f" {
				t.Fatalf("event time %v guest time %v: want the host's and the guest's", ev.Time, ev.FS.GuestTime)
			}
			if len(ev.FS.Path) > maxReportedPath {
				t.Fatalf("a %d-byte path was recorded whole", len(ev.FS.Path))
			}
		case ev.Agent != nil && ev.Agent.State == store.AgentRateLimited:
			dropped += ev.Agent.Count
		case ev.Agent != nil && ev.Agent.State == store.AgentCapped:
			capped += ev.Agent.Count
		}
	}
	// The loop takes well under a second: the refill adds at most a few
	// thousand tokens beyond the burst.
	if fs < fsEventsBurst || fs > sent {
		t.Errorf("%d file events recorded of %d sent, want the burst (%d) and at most what the rate refilled", fs, sent+1, fsEventsBurst)
	}
	if fs+dropped != sent+1 {
		t.Errorf("%d recorded + %d counted as dropped != %d sent: an event went uncounted", fs, dropped, sent+1)
	}
	if capped > 1 {
		t.Errorf("capped count %d, want at most the one long path", capped)
	}

	// Under the rate, a long path is cut and counted.
	rec = &memRecorder{}
	g = newGuestRecord(rec, slog.New(slog.DiscardHandler))
	g.fileEvent(proto.FileEvent{Action: "renamed", Path: strings.Repeat("p", maxReportedPath+10), OldPath: "old"})
	g.flush()
	if len(rec.evs) != 2 || rec.evs[0].FS == nil || len(rec.evs[0].FS.Path) != maxReportedPath || rec.evs[0].FS.OldPath != "old" ||
		rec.evs[1].Agent == nil || rec.evs[1].Agent.State != store.AgentCapped || rec.evs[1].Agent.Count != 1 {
		t.Errorf("a long path: events %+v, want it cut to %d bytes and one capped event", rec.evs, maxReportedPath)
	}
	// An action the agent never sends is not kept as the guest wrote it.
	rec = &memRecorder{}
	g = newGuestRecord(rec, slog.New(slog.DiscardHandler))
	g.fileEvent(proto.FileEvent{Action: strings.Repeat("\x1b[8m", 1000), Path: "f"})
	g.flush()
	if len(rec.evs) != 2 || rec.evs[0].FS == nil || rec.evs[0].FS.Action != "unknown" || rec.evs[1].Agent == nil || rec.evs[1].Agent.State != store.AgentCapped {
		t.Errorf("an unknown action: events %+v, want it stored as unknown and one capped event", rec.evs)
	}
}
