package netstack

import (
	"sync"
	"time"

	"github.com/capsem/capsem/store"
)

// dnsLog records DNS answers under the drop log's rate limit, one window
// per reason and transport: the first dropBurst answers of each kind a
// second are recorded one by one, the rest as one event whose Count says
// how many queries it stands for. Every answer is counted; a flood of
// queries (33k a second measured) costs the store a few events a second.
type dnsLog struct {
	rec Recorder
	mu  sync.Mutex
	per map[dnsKey]*dnsState
}

type dnsKey struct {
	reason    string
	transport store.Transport
}

type dnsState struct {
	window
	last store.DNS
}

func newDNSLog(rec Recorder) *dnsLog {
	return &dnsLog{rec: rec, per: make(map[dnsKey]*dnsState)}
}

// record records ev, or counts it into the next aggregate.
func (l *dnsLog) record(ev *store.DNS) {
	ev.Count = 1
	k := dnsKey{ev.Reason, ev.Transport}
	l.mu.Lock()
	st := l.per[k]
	if st == nil {
		st = &dnsState{window: window{start: time.Now()}}
		l.per[k] = st
	}
	individual, due := st.take(time.Now())
	if due > 0 {
		l.emitLocked(st, due)
	}
	if !individual {
		st.last = *ev
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.rec.Append(store.Event{Kind: store.KindDNS, DNS: ev})
}

func (l *dnsLog) emitLocked(st *dnsState, n int64) {
	ev := st.last
	ev.Count = n
	l.rec.Append(store.Event{Kind: store.KindDNS, DNS: &ev})
}

// flushStale records the aggregates of windows that ended with no query
// after them.
func (l *dnsLog) flushStale(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.per {
		if st.stale(now) {
			l.emitLocked(st, st.suppressed)
			st.suppressed = 0
		}
	}
}

// flush records every pending aggregate.
func (l *dnsLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.per {
		if st.suppressed > 0 {
			l.emitLocked(st, st.suppressed)
			st.suppressed = 0
		}
	}
}
