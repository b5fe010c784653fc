package ui

import (
	"cmp"
	"slices"
	"sync"

	"github.com/capsem/capsem/store"
)

// hostStat is what a session did with one host (a name, or an address
// without one).
type hostStat struct {
	Host     string
	Requests int64 // HTTP requests the MITM saw
	Flows    int64 // flows and refused packets (each weighted by its count)
	Denied   int64 // denied flows, requests and DNS queries
	Bytes    int64 // sent and received
	// BarWidth is the bar's share of the chart's width, by Bytes (by
	// Requests+Flows when no host moved a byte).
	BarWidth int
}

// hostCache keeps each session's host summary, good while the session has
// as many events as when it was made: a finished session is read whole
// once, however often its page is opened.
type hostCache struct {
	mu sync.Mutex
	m  map[string]hostEntry
}

type hostEntry struct {
	events int64
	stats  []hostStat
}

func (c *hostCache) get(src Source, sess store.Session) ([]hostStat, error) {
	c.mu.Lock()
	e, ok := c.m[sess.ID]
	c.mu.Unlock()
	if ok && e.events == sess.Counts.Events {
		return e.stats, nil
	}
	stats, err := hostStats(src, sess.ID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]hostEntry{}
	}
	c.m[sess.ID] = hostEntry{events: sess.Counts.Events, stats: stats}
	c.mu.Unlock()
	return stats, nil
}

// barWidth is the widest bar of the chart, in the SVG's units.
const barWidth = 400

// hostStats reads the whole session and sums it per host, most bytes
// first.
func hostStats(src Source, id string) ([]hostStat, error) {
	by := map[string]*hostStat{}
	get := func(h string) *hostStat {
		if h == "" {
			h = "(no address)"
		}
		s := by[h]
		if s == nil {
			s = &hostStat{Host: h}
			by[h] = s
		}
		return s
	}
	err := src.EventsAfter(id, 0, func(ev store.Event) error {
		switch {
		case ev.Net != nil:
			n := ev.Net
			s := get(netHost(n))
			w := max(n.Count, 1)
			if n.Method != "" {
				s.Requests++
			} else {
				s.Flows += w
				s.Bytes += n.BytesSent + n.BytesReceived
			}
			if n.Decision == store.Denied {
				s.Denied += w
			}
		case ev.DNS != nil && ev.DNS.Decision == store.Denied:
			get(ev.DNS.QName).Denied += max(ev.DNS.Count, 1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]hostStat, 0, len(by))
	var most, mostActs int64
	for _, s := range by {
		out = append(out, *s)
		most, mostActs = max(most, s.Bytes), max(mostActs, s.Requests+s.Flows)
	}
	slices.SortFunc(out, func(a, b hostStat) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(b.Requests+b.Flows, a.Requests+a.Flows), cmp.Compare(a.Host, b.Host))
	})
	for i := range out {
		switch {
		case most > 0:
			out[i].BarWidth = int(out[i].Bytes * barWidth / most)
		case mostActs > 0:
			out[i].BarWidth = int((out[i].Requests + out[i].Flows) * barWidth / mostActs)
		}
	}
	return out, nil
}
