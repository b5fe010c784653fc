package netstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// UDP to port 443 is QUIC (HTTP/3). A datagram that belongs to a flow goes
// to it. Otherwise only a QUIC Initial (quicinitial.go) is looked at, and
// decided as a TCP SYN is: the destination must be an address fake DNS
// handed out, for a name the policy allows on port 443, under [quic] mode
// "intercept", and a handler must serve it. Then it starts a flow, keyed
// by the guest's source port and the destination address, whose datagrams
// (this Initial first) a DatagramFlowHandler — the MITM — reads from a
// net.PacketConn. Anything else that is not a flow's is dropped as
// udp-not-allowed, so a guest that moves a flow to another source port
// (QUIC connection migration) is not followed.
//
// A QUIC Initial to another port is decided as the SYN to that port too,
// and refused with the SYN's reason (a name allowed on 443 only is
// port-not-allowed, not udp-not-allowed like any UDP: that would say the
// guest broke a UDP rule when it asked for a port the policy does not
// allow), or quic-unserved on a port the policy allows: capsem
// intercepts QUIC on 443 only.
//
// A refused Initial gets ICMP port unreachable: it is the UDP analogue of
// TCP's RST, and a QUIC client that gets it on a connected socket fails at
// once (ECONNREFUSED) and falls back to TCP, where a silent drop leaves it
// waiting for its handshake timeout.

const portHTTPS = 443

// DefaultQUICIdleTimeout ends a QUIC flow after 30 s without a datagram
// either way: quic-go's default MaxIdleTimeout, so a handler whose QUIC
// server keeps that default has closed its connection by the time the
// flow ends, and a client that simply stopped is not held for longer.
const DefaultQUICIdleTimeout = 30 * time.Second

// quicHandshakeWindow is how long a QUIC flow counts against
// MaxQUICHandshakes unless its handler calls Flow.Established sooner. The
// guest is a hop away, so a real handshake takes the MITM's own work plus
// its upstream attempt (at most 300 ms: the MITM's probe of an upstream's
// QUIC); a flow still
// without one after ten times that is likelier a flood's than a client's,
// and stops keeping a well-behaved client's Initials out.
const quicHandshakeWindow = 3 * time.Second

// DatagramFlowHandler carries one allowed QUIC flow until it ends.
// netstack never imports mitm: the MITM is a DatagramFlowHandler. pc's
// ReadFrom returns the guest's datagrams of the flow, the Initial that
// started it first; WriteTo sends datagrams to the guest from f.Dst. The
// handler calls f.Established once the QUIC handshake is done, and must
// return when ctx is done (the flow went idle for QUICIdleTimeout, or the
// stack is closing: pc is closed then too). A FlowResult.Refused reason
// sends the guest ICMP port unreachable, so that it falls back to TCP.
type DatagramFlowHandler func(ctx context.Context, pc net.PacketConn, f *Flow) FlowResult

// quicKey names a QUIC flow: the guest's source port and the address it
// sends to (the guest's address is always GuestIP, a flow's port always
// 443).
type quicKey struct {
	sport uint16
	dst   netip.Addr
}

// quicFlows are a stack's open QUIC flows.
type quicFlows struct {
	mu sync.Mutex
	m  map[quicKey]*udpFlowConn
	// handshakes counts the flows in their handshake (MaxQUICHandshakes).
	handshakes slots
}

func (q *quicFlows) get(k quicKey) *udpFlowConn {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.m[k]
}

func (q *quicFlows) put(k quicKey, c *udpFlowConn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[quicKey]*udpFlowConn{}
	}
	q.m[k] = c
}

func (q *quicFlows) remove(k quicKey, c *udpFlowConn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m[k] == c {
		delete(q.m, k)
	}
}

// serveQUIC takes a guest's UDP datagram to port 443: ip is its IPv4
// packet, payload the UDP payload. It runs on the goroutine that reads the
// guest's frames, and never blocks.
func (s *Stack) serveQUIC(ip header.IPv4, sport uint16, payload []byte) {
	key := quicKey{sport: sport, dst: addrOf(ip.DestinationAddress())}
	if c := s.quic.get(key); c != nil {
		c.push(payload)
		return
	}
	if !isQUICInitial(payload) {
		s.drops.recordDetail(ReasonUDPNotAllowed, store.TransportUDP, key.dst, portHTTPS, func() string {
			return fmt.Sprintf("UDP from port %d is no QUIC flow's and not a QUIC Initial: a QUIC connection moved to another port (migration) is not followed, start a new one", key.sport)
		})
		return
	}
	s.startQUIC(ip, key, portHTTPS, payload)
}

// startQUIC decides a QUIC Initial to port that belongs to no flow, as a
// SYN to that port is decided, and starts its flow when it is allowed and
// port is 443 (capsem serves QUIC there only: on another port an allowed
// name is quic-unserved, and the client falls back to TCP). Refusals are
// recorded under the drop log's rate limit, like refused SYNs; the flow
// itself is one event when it ends.
func (s *Stack) startQUIC(ip header.IPv4, key quicKey, port uint16, initial []byte) {
	dst := netip.AddrPortFrom(key.dst, port)
	src := netip.AddrPortFrom(GuestIP, key.sport)
	ev := store.Net{
		Transport: store.TransportUDP,
		IP:        dst.Addr(),
		Port:      port,
		SrcIP:     src.Addr(),
		SrcPort:   src.Port(),
		ConnType:  store.ConnQUIC,
		Count:     1,
	}
	refuse := func(reason, detail string) {
		s.portUnreachable(ip)
		s.stats.FlowsDenied.Add(1)
		ev.Decision, ev.Reason, ev.Detail = store.Denied, reason, detail
		s.drops.event("udp", &ev)
	}
	// Held until the flow ends: the address keeps its name meanwhile.
	entry, ok := s.dns.acquire(dst.Addr())
	if !ok {
		if dst.Addr() == GatewayIP {
			refuse(ReasonGatewayPort, "the gateway serves only DNS and DHCP over UDP")
		} else {
			refuse(ReasonDirectIP, "only addresses handed out by capsem's DNS for allowed names can be reached")
		}
		return
	}
	handed := false
	defer func() {
		if !handed {
			s.dns.release(entry)
		}
	}()
	name := entry.name
	ev.Domain = name
	pol := s.policy.Load()
	dec := pol.DecideFlow(name, port)
	ev.MatchedRule = dec.Rule
	switch {
	case !dec.Allowed:
		refuse(dec.Reason, "")
		return
	case dec.Reason == policy.ReasonForwarded:
		refuse(ReasonQUICUnserved, "a [[forward]] carries TCP only: the client falls back to TCP")
		return
	case pol.QUICMode() == policy.QUICBlock:
		refuse(ReasonQUICBlocked, "the policy says [quic] mode = \"block\": HTTP/3 clients fall back to TCP")
		return
	case s.cfg.QUICFlows == nil:
		refuse(ReasonQUICUnserved, "this capsem serves no QUIC: HTTP/3 clients fall back to TCP")
		return
	case port != portHTTPS:
		refuse(ReasonQUICUnserved, fmt.Sprintf("capsem serves QUIC on port %d only: HTTP/3 clients fall back to TCP, which port %d is allowed for", portHTTPS, port))
		return
	}
	if err := s.admit(); err != nil {
		s.stats.StoreRefusals.Add(1)
		refuse(ReasonStoreDown, err.Error())
		return
	}
	if !s.quic.handshakes.take() {
		// Dropped, not refused: a real client resends its Initial, and
		// is served once the handshakes in progress are done.
		s.drops.record(ReasonQUICFlood, store.TransportUDP, dst.Addr(), portHTTPS,
			"more QUIC Initials than MaxQUICHandshakes were waiting for their handshake; the guest resends")
		return
	}
	if !s.flowSlots.take() {
		s.quic.handshakes.give()
		s.stats.FlowsCapped.Add(1)
		refuse(ReasonFlowCap, fmt.Sprintf("%d flows are open (MaxFlows)", s.cfg.MaxFlows))
		return
	}
	if !s.flowStart() {
		s.flowSlots.give()
		s.quic.handshakes.give()
		return
	}
	handed = true
	c := newUDPFlowConn(s, dst, src)
	c.push(initial)
	s.quic.put(key, c)
	s.stats.FlowsAllowed.Add(1)
	quote := append([]byte(nil), ip[:min(len(ip), int(ip.HeaderLength())+icmpQuoteBytes)]...)
	go s.runQUIC(key, c, entry, ev, dec, pol.MCPGateway(name), quote)
}

// runQUIC carries one QUIC flow from its handler's start to its event.
// quote is the start of the Initial's IP packet, for the ICMP error a
// refusal by the handler sends.
func (s *Stack) runQUIC(key quicKey, c *udpFlowConn, entry *poolEntry, ev store.Net, dec policy.Decision, local bool, quote []byte) {
	defer s.flowsWG.Done()
	defer s.flowSlots.give()
	defer s.dns.release(entry)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	var handshakeOnce sync.Once
	endHandshake := func() { handshakeOnce.Do(s.quic.handshakes.give) }
	handshakeTimer := time.AfterFunc(quicHandshakeWindow, endHandshake)
	defer func() {
		handshakeTimer.Stop()
		endHandshake()
	}()
	var idled atomic.Bool
	idle := watchIdle(s.cfg.QUICIdleTimeout, &c.lastUsed, func() {
		idled.Store(true)
		cancel()
	})
	defer idle.stop()

	var established atomic.Bool
	flow := &Flow{Name: entry.name, Port: portHTTPS, Guest: c.guest, Dst: c.local, Transport: store.TransportUDP,
		MaxDatagram: int(s.link.MTU()) - header.IPv4MinimumSize - header.UDPMinimumSize,
		Current:     s.policy.Load,
		Local:       local,
		Redial:      s.redial(entry.name, portHTTPS, local),
		Upstream:    s.upstreamAddrs(entry.name, portHTTPS, local),
		established: func() {
			handshakeTimer.Stop()
			established.Store(true)
			endHandshake()
		},
	}
	start := time.Now()
	res := s.cfg.QUICFlows(ctx, c, flow)
	c.Close()
	s.quic.remove(key, c)

	ev.Decision, ev.Reason = store.Allowed, dec.Reason
	if res.Refused != "" {
		s.stats.FlowsAllowed.Add(^uint64(0))
		s.stats.FlowsDenied.Add(1)
		ev.Decision, ev.Reason = store.Denied, res.Refused
		s.portUnreachable(header.IPv4(quote))
	}
	// The handler's counts, like a TCP flow's; a handler that keeps none
	// is credited with the datagrams' payload bytes.
	if res.BytesSent == 0 && res.BytesReceived == 0 {
		res.BytesSent, res.BytesReceived = c.sent.Load(), c.received.Load()
	}
	s.stats.BytesToUpstream.Add(uint64(res.BytesSent))
	s.stats.BytesFromUpstream.Add(uint64(res.BytesReceived))
	ev.BytesSent, ev.BytesReceived = res.BytesSent, res.BytesReceived
	ev.Duration = time.Since(start)
	ev.Detail = "quic flow"
	if local {
		ev.Detail = "quic flow served by capsem (the MCP gateway)"
	}
	if idled.Load() {
		ev.Detail += fmt.Sprintf(", ended after %s without a datagram (QUICIdleTimeout)", s.cfg.QUICIdleTimeout)
	}
	if res.ConnType != "" {
		ev.ConnType = res.ConnType
	}
	if res.Err != nil {
		ev.Detail += ": " + res.Err.Error()
	}
	if res.Refused != "" && !established.Load() {
		// Refused before its handshake (a hello that does not parse, a
		// name that is not the resolved one): an Initial of junk costs
		// the guest a datagram and the handler microseconds, so these
		// are rate-limited as refused SYNs are, where one event each let
		// a guest fill the session's budget (2,000 Initials, 2,000 events).
		s.drops.event("udp", &ev)
		return
	}
	s.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
}

// portUnreachable answers the guest's IPv4 packet ip with ICMP port
// unreachable from the address ip was sent to.
func (s *Stack) portUnreachable(ip header.IPv4) {
	bp := frameBufs.Get().(*[]byte)
	defer frameBufs.Put(bp)
	*bp = appendICMPPortUnreachable((*bp)[:0], s.guestLink(), s.link.mac, ip)
	if err := s.link.writeFrame(*bp); err != nil {
		s.log.Debug("icmp port unreachable not sent", "err", err)
	}
}

// idleWatch calls its func once last (unix nanoseconds) is timeout old.
// One timer per flow, pushed back when it fires early rather than reset
// on every datagram.
type idleWatch struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool // a firing that waited for mu while stop ran must not re-arm
}

func watchIdle(timeout time.Duration, last *atomic.Int64, expired func()) *idleWatch {
	w := &idleWatch{}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t = time.AfterFunc(timeout, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopped {
			return
		}
		if rest := timeout - time.Since(time.Unix(0, last.Load())); rest > 0 {
			w.t.Reset(rest)
			return
		}
		expired()
	})
	return w
}

func (w *idleWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.t.Stop()
}
