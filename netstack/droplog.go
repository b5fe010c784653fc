package netstack

import (
	"net/netip"
	"sync"
	"time"

	"github.com/capsem/capsem/store"
)

// dropBurst is how many events per reason are recorded individually
// each second. Beyond it, drops are counted and recorded as one event whose
// Count says how many it stands for, so a guest flooding garbage cannot
// flood the store, and no drop goes uncounted.
const dropBurst = 50

type dropState struct {
	windowStart time.Time
	inWindow    int
	suppressed  int64
	last        store.Net
}

type dropLog struct {
	rec   Recorder
	stats *Stats
	mu    sync.Mutex
	per   map[string]*dropState
}

func newDropLog(rec Recorder, stats *Stats) *dropLog {
	return &dropLog{rec: rec, stats: stats, per: make(map[string]*dropState)}
}

// record counts one dropped frame and records it, subject to the rate limit.
func (d *dropLog) record(reason string, transport store.Transport, ip netip.Addr, port uint16, detail string) {
	d.stats.FramesDropped.Add(1)
	d.log(store.Denied, reason, transport, ip, port, detail, nil)
}

// recordDetail is record for a detail that costs something to format: mk
// is called only when the drop is recorded individually, so a flood of
// such frames allocates nothing beyond the rate limit.
func (d *dropLog) recordDetail(reason string, transport store.Transport, ip netip.Addr, port uint16, mk func() string) {
	d.stats.FramesDropped.Add(1)
	d.log(store.Denied, reason, transport, ip, port, "", mk)
}

// allowed records a frame the guard let through that makes no flow of its
// own (ICMP echo to the gateway), under the same rate limit.
func (d *dropLog) allowed(reason string, transport store.Transport, ip netip.Addr) {
	d.log(store.Allowed, reason, transport, ip, 0, "", nil)
}

func (d *dropLog) log(decision store.Decision, reason string, transport store.Transport, ip netip.Addr, port uint16, detail string, mk func() string) {
	fill := func(ev *store.Net) {
		*ev = store.Net{Transport: transport, Decision: decision, Reason: reason, IP: ip, Port: port, Detail: detail, Count: 1}
	}
	now := time.Now()
	d.mu.Lock()
	st := d.per[reason]
	if st == nil {
		st = &dropState{windowStart: now}
		d.per[reason] = st
	}
	if now.Sub(st.windowStart) >= time.Second {
		d.emitSuppressedLocked(st)
		st.windowStart = now
		st.inWindow = 0
	}
	if st.inWindow >= dropBurst {
		// Counted into the next aggregate event; built in place so a
		// flood allocates nothing.
		st.suppressed++
		fill(&st.last)
		d.mu.Unlock()
		return
	}
	st.inWindow++
	d.mu.Unlock()
	ev := new(store.Net)
	fill(ev)
	if mk != nil {
		ev.Detail = mk()
	}
	d.rec.Append(store.Event{Kind: store.KindNet, Net: ev})
}

func (d *dropLog) emitSuppressedLocked(st *dropState) {
	if st.suppressed == 0 {
		return
	}
	ev := st.last
	ev.Count = st.suppressed
	ev.Detail = "rate-limited: this event stands for Count drops like the last one"
	st.suppressed = 0
	d.rec.Append(store.Event{Kind: store.KindNet, Net: &ev})
}

// flush records every pending suppressed count.
func (d *dropLog) flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range d.per {
		d.emitSuppressedLocked(st)
	}
}
