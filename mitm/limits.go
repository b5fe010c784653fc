package mitm

import (
	"sync/atomic"
	"time"
)

// What a guest can make the MITM hold while it reads request bodies whole
// before forwarding them — the secrets and DLP guard (a body up to
// MaxBufferedBody, so that a leak is refused before a byte leaves and a
// substituted body keeps an exact Content-Length), MCP to a host with deny
// rules (up to mcpMaxHold), and the MCP gateway's requests. A body that
// stalls one byte short of its Content-Length held its bytes for as long
// as the guest liked, and HTTP/2 let a connection have 250 such streams:
// 4,096 flows × 250 streams × 1 MiB. Now a held body takes its bytes from
// the flow's budget and the proxy's, as it reads them; past either the
// request is refused (503, body-hold-budget) and what it held is given
// back; a held body must arrive within Config.HeldBodyDeadline (408,
// body-read-timeout); and a guest connection has at most maxGuestStreams
// requests at once.
const (
	// DefaultMaxHeldBodies is what all flows together may hold
	// (Config.MaxHeldBodies when zero): 32 ordinary 1 MiB bodies, or
	// eight of MCP's largest, at once.
	DefaultMaxHeldBodies = 32 << 20
	// maxHeldPerFlow is what one guest connection may hold: two of MCP's
	// largest held bodies, or eight of the guard's; a connection that
	// needs more at once waits for none — its further requests are
	// refused until the first are forwarded.
	maxHeldPerFlow = 8 << 20
	// DefaultHeldBodyDeadline is how long a held body may take to arrive
	// (Config.HeldBodyDeadline when zero): a 1 MiB body at 35 KB/s; an
	// upload slower than that is better streamed (no Content-Length).
	DefaultHeldBodyDeadline = 30 * time.Second
	// maxGuestStreams bounds the requests a guest's HTTP/2 or HTTP/3
	// connection has in flight at once: each is a handler goroutine and
	// whatever it holds. RFC 9113 asks servers for no fewer than 100, and
	// browsers open about that many; x/net's default of 250 let a guest
	// keep 1,000,000 requests over MaxFlows connections.
	maxGuestStreams = 100
)

// holdBudget counts the bytes of held bodies against a bound.
type holdBudget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes; false (and nothing reserved) past the bound.
// Never over it, even for a moment: a reader of used sees the truth.
func (b *holdBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *holdBudget) give(n int64) { b.used.Add(-n) }
