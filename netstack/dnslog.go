package netstack

import (
	"github.com/capsem/capsem/store"
)

// dnsLog records DNS answers under the drop log's rate limit, one window
// per reason and transport: the first dropBurst answers of each kind a
// second are recorded one by one, the rest as one event whose Count says
// how many queries it stands for. Every answer is counted; a flood of
// queries (33k a second measured) costs the store a few events a second.
type dnsLog struct {
	rec Recorder
	*aggregator[dnsKey, store.DNS]
}

type dnsKey struct {
	reason    string
	transport store.Transport
}

func newDNSLog(rec Recorder) *dnsLog {
	return &dnsLog{rec: rec, aggregator: newAggregator[dnsKey](func(last store.DNS, n int64) {
		last.Count = n
		rec.Append(store.Event{Kind: store.KindDNS, DNS: &last})
	})}
}

// record records ev, or counts it into the next aggregate.
func (l *dnsLog) record(ev *store.DNS) {
	ev.Count = 1
	if l.add(dnsKey{ev.Reason, ev.Transport}, ev) {
		l.rec.Append(store.Event{Kind: store.KindDNS, DNS: ev})
	}
}
