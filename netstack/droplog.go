package netstack

import (
	"net/netip"

	"github.com/capsem/capsem/store"
)

// aggregateDetail marks an aggregate net event.
const aggregateDetail = "rate-limited: this event stands for Count events like the last one"

// netKey is the drop log's rate-limit key: kind ("" for a dropped or
// allowed frame, "tcp" for a flow refused at the SYN, "dhcp" for an answer)
// and reason. A struct rather than kind+" "+reason, which cost an allocation
// per refused SYN or DHCP message.
type netKey struct{ kind, reason string }

// dropLog records drops (frames refused by the guard), flows refused at
// the SYN and DHCP answers, each key under its own rate limit.
type dropLog struct {
	rec   Recorder
	stats *Stats
	*aggregator[netKey, store.Net]
}

func newDropLog(rec Recorder, stats *Stats) *dropLog {
	return &dropLog{rec: rec, stats: stats, aggregator: newAggregator[netKey](func(last store.Net, n int64) {
		last.Count = n
		last.Detail = aggregateDetail
		rec.Append(store.Event{Kind: store.KindNet, Net: &last})
	})}
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
	// Built on the stack: past the rate limit it is only copied into the
	// aggregate, so a flood allocates nothing.
	ev := store.Net{Transport: transport, Decision: decision, Reason: reason, IP: ip, Port: port, Detail: detail, Count: 1}
	if !d.add(netKey{reason: reason}, &ev) {
		return
	}
	out := ev
	if mk != nil {
		out.Detail = mk()
	}
	d.rec.Append(store.Event{Kind: store.KindNet, Net: &out})
}

// event records ev — a flow refused at the SYN (kind "tcp"), a DHCP answer
// (kind "dhcp") — under kind and its reason, with the same rate limit as
// drops.
func (d *dropLog) event(kind string, ev *store.Net) {
	ev.Count = 1
	if d.add(netKey{kind, ev.Reason}, ev) {
		d.rec.Append(store.Event{Kind: store.KindNet, Net: ev})
	}
}
