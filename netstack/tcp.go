package netstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// Flow is an allowed TCP connection, handed to a FlowHandler once both ends
// are connected, or an allowed QUIC flow, handed to a DatagramFlowHandler
// with its first Initial (quic.go).
type Flow struct {
	Name  string         // the allowed name the guest resolved
	Port  uint16         // the port the guest dialled (443 for QUIC)
	Guest netip.AddrPort // the guest's end
	Dst   netip.AddrPort // the synthetic address the guest dialled
	// Transport is store.TransportTCP for a TCP flow, store.TransportUDP
	// for a QUIC flow.
	Transport store.Transport

	// Current returns the policy in force now (it changes on reload), for
	// handlers that decide again on every request of a long connection.
	// There is no snapshot of the policy that allowed the flow beside it:
	// a handler that kept one would ignore a reload. A handler takes
	// Current() once per decision it makes as a whole (one HTTP exchange,
	// say), so that one decision never mixes two policies.
	Current func() *policy.Policy
	// Redial opens another upstream connection for this flow's name and
	// port under pol — the policy that decided what the connection is for,
	// so that a connection and the requests it carries answer to one
	// policy — with the same rebinding checks and [upstream] resolve rules
	// as the first one. It is always TCP: for a QUIC flow it is the
	// connection to name:443 the MITM falls back to when the upstream does
	// not answer QUIC.
	Redial func(ctx context.Context, pol *policy.Policy) (net.Conn, error)
	// Upstream returns the addresses Redial would dial under pol, decided
	// again and checked the same way ([upstream] resolve, no private
	// answers unless allow_private), for a handler that reaches the
	// upstream otherwise than over TCP: the MITM tries HTTP/3 over UDP to
	// them.
	Upstream func(ctx context.Context, pol *policy.Policy) ([]netip.AddrPort, error)
	// Dialed is the policy the upstream connection handed to the handler
	// was dialled under (the one in force at the guest's SYN), nil when
	// none was (Local, Pooled). A reload may have replaced it by the time
	// the handler decides anything: Current() is not that policy.
	Dialed *policy.Policy
	// Local is true for a flow to a name capsem serves itself (the MCP
	// gateway, policy.MCPGatewayHost): nothing was dialled, the upstream
	// the handler gets is nil and Redial refuses. A handler that cannot
	// serve it must refuse the flow.
	Local bool
	// Pooled is true when nothing was dialled because Config.Pooled said
	// the handler holds a connection to the upstream already: the
	// upstream the handler gets is nil, and Redial dials when needed.
	Pooled bool
	// MaxDatagram, for a QUIC flow, is the largest UDP payload the guest's
	// link carries (its MTU less the IPv4 and UDP headers): a QUIC server
	// on the flow's PacketConn cannot discover it, having no socket to set
	// Don't Fragment on. Zero for a TCP flow.
	MaxDatagram int

	// established, for a QUIC flow, gives back its handshake slot.
	established func()
}

// Established tells the stack that a QUIC flow's handshake is done, so it
// no longer counts against MaxQUICHandshakes (quic.go); a flow that never
// says so stops counting after quicHandshakeWindow. Calling it again, or
// on a TCP flow, does nothing.
func (f *Flow) Established() {
	if f.established != nil {
		f.established()
	}
}

// FlowResult is what a FlowHandler reports when the flow ends.
type FlowResult struct {
	BytesSent     int64          // guest to upstream
	BytesReceived int64          // upstream to guest
	ConnType      store.ConnType // tcp for a plain splice; handlers may say tls, https, …
	// Refused, when set, is the reason the handler refused the flow after
	// looking into it (a TLS server name that is not the name the guest
	// resolved, say): the flow is then recorded as denied.
	Refused string
	Err     error
}

// FlowHandler carries one allowed flow until it ends. netstack never
// imports mitm: the MITM is a FlowHandler. A handler must return when ctx
// is done. It owns upstream and must close it (it may hand it on, to a
// connection pool say, and close it later); the caller closes guest.
type FlowHandler func(ctx context.Context, guest, upstream net.Conn, f *Flow) FlowResult

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// waitBufs hold the read that waits on a quiet flow (see copyStream).
var waitBufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// idleRelease is how long a flow may go without data before its large
// copy buffer goes back to copyBufs.
const idleRelease = time.Second

// Splice copies bytes both ways until both directions end, propagating
// half-closes, and resets: when one side resets its connection (or fails
// in any other way than a clean end), the other side's connection is reset
// too, so that neither takes a truncated stream for a complete one.
//
// A local flow (Flow.Local: nothing was dialled) is refused: there is
// nothing to splice it to.
func Splice(ctx context.Context, guest, upstream net.Conn, f *Flow) FlowResult {
	if upstream == nil {
		return FlowResult{ConnType: store.ConnTCP, Refused: ReasonLocalUnserved,
			Err: fmt.Errorf("%s is served by capsem itself, and this flow's handler does not serve it", f.Name)}
	}
	stop := context.AfterFunc(ctx, func() {
		guest.Close()
		upstream.Close()
	})
	defer stop()
	defer upstream.Close()
	var res FlowResult
	res.ConnType = store.ConnTCP
	var wg sync.WaitGroup
	var upErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		res.BytesReceived, upErr = copyHalf(guest, upstream)
	}()
	var downErr error
	res.BytesSent, downErr = copyHalf(upstream, guest)
	wg.Wait()
	res.Err = errors.Join(downErr, upErr)
	return res
}

type closeWriter interface{ CloseWrite() error }

// copyHalf copies src to dst, then half-closes dst. When reading src fails
// with anything but a clean end, dst is reset instead, so the failure
// reaches the other peer as a failure.
func copyHalf(dst, src net.Conn) (int64, error) {
	n, fromRead, err := copyStream(dst, src)
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if err != nil && !errors.Is(err, io.EOF) && fromRead {
		resetConn(dst)
		return n, err
	}
	if cw, ok := dst.(closeWriter); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// copyStream copies src to dst until reading src (fromRead) or writing dst
// fails; a read's error includes io.EOF.
// A quiet flow waits for data with a 4 KiB buffer; a read that fills it
// takes a 256 KiB buffer from copyBufs for as long as data keeps coming, and
// gives it back after idleRelease without any. Holding the large buffer
// across the wait cost 512 KiB of heap per idle flow, resident once Go
// reused freed memory (it zeroes reused spans): 1,000 idle flows took
// capsem-net from 39 to 323 MB RSS.
func copyStream(dst io.Writer, src net.Conn) (written int64, fromRead bool, err error) {
	wp := waitBufs.Get().(*[]byte)
	defer waitBufs.Put(wp)
	var bp *[]byte
	defer func() {
		if bp != nil {
			copyBufs.Put(bp)
		}
	}()
	var armed time.Time // when the read deadline was last pushed out
	for {
		buf := *wp
		if bp != nil {
			buf = *bp
			// Push the deadline out at most twice per idleRelease, not
			// per read: a gonet deadline is a new timer.
			if now := time.Now(); now.Sub(armed) > idleRelease/2 {
				src.SetReadDeadline(now.Add(idleRelease))
				armed = now
			}
		}
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			written += int64(nw)
			if werr == nil && nw != nr {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return written, false, werr
			}
		}
		if rerr != nil {
			var ne net.Error
			if bp != nil && errors.As(rerr, &ne) && ne.Timeout() {
				src.SetReadDeadline(time.Time{})
				copyBufs.Put(bp)
				bp, armed = nil, time.Time{}
				continue
			}
			return written, true, rerr
		}
		if bp == nil && nr == len(buf) {
			bp = copyBufs.Get().(*[]byte)
		}
	}
}

// resetConn ends c with a RST rather than a FIN: SO_LINGER 0 on a host
// socket, Abort on a guest connection.
func resetConn(c net.Conn) {
	switch rc := c.(type) {
	case interface{ SetLinger(int) error }:
		rc.SetLinger(0)
		c.Close()
	case interface{ Abort() }:
		rc.Abort()
	default:
		c.Close()
	}
}

// guestConn is the guest's end of an allowed flow. Abort resets it.
type guestConn struct {
	*gonet.TCPConn
	ep tcpip.Endpoint
}

func (g *guestConn) Abort() { g.ep.Abort() }

// handleTCP decides a guest's SYN before the handshake completes: a denied
// flow gets a RST and the guest never sees a connection; an allowed one is
// dialled upstream first, so an unreachable upstream is a RST too.
//
// Refusals made here without dialling (policy, caps, the store) are
// recorded under the drop log's rate limit, each counted; the outcome of
// every dial, and every flow, is recorded one event each.
func (s *Stack) handleTCP(r *tcp.ForwarderRequest) {
	if !s.flowStart() {
		r.Complete(true)
		return
	}
	defer s.flowsWG.Done()

	id := r.ID()
	dst := netip.AddrPortFrom(addrOf(id.LocalAddress), id.LocalPort)
	src := netip.AddrPortFrom(addrOf(id.RemoteAddress), id.RemotePort)
	ev := store.Net{
		Transport: store.TransportTCP,
		IP:        dst.Addr(),
		Port:      dst.Port(),
		SrcIP:     src.Addr(),
		SrcPort:   src.Port(),
		ConnType:  store.ConnTCP,
		Count:     1,
	}
	// refuse answers the SYN with a RST and records it, rate-limited.
	refuse := func(reason, detail string) {
		r.Complete(true)
		s.stats.FlowsDenied.Add(1)
		ev.Decision, ev.Reason, ev.Detail = store.Denied, reason, detail
		s.drops.event("tcp", &ev)
	}
	// deny answers the SYN with a RST after a dial, recorded one by one.
	deny := func(reason, detail string) {
		r.Complete(true)
		s.stats.FlowsDenied.Add(1)
		ev.Decision, ev.Reason, ev.Detail = store.Denied, reason, detail
		s.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
	}

	if dst.Port() == udpPortDNS {
		// DNS over TCP, to any address, is answered by fake DNS.
		if !s.dnsSlots.take() {
			s.stats.DNSTCPCapped.Add(1)
			refuse(ReasonDNSTCPCap, fmt.Sprintf("%d TCP/53 connections are open (MaxDNSTCPConns)", s.cfg.MaxDNSTCPConns))
			return
		}
		defer s.dnsSlots.give()
		if !s.flowSlots.take() {
			s.stats.FlowsCapped.Add(1)
			refuse(ReasonFlowCap, fmt.Sprintf("%d flows are open (MaxFlows)", s.cfg.MaxFlows))
			return
		}
		defer s.flowSlots.give()
		conn, ok := s.acceptDNS(r)
		if !ok {
			return
		}
		s.serveTCPDNS(conn, dst.Addr())
		return
	}
	if dst.Port() == portDoT {
		refuse(ReasonDoT, "DNS over TLS is never forwarded: capsem answers DNS itself")
		return
	}
	// Held until the flow ends: the address keeps its name meanwhile.
	entry, ok := s.dns.acquire(dst.Addr())
	if !ok {
		if dst.Addr() == GatewayIP {
			refuse(ReasonGatewayPort, "the gateway only serves DNS on port 53")
		} else {
			refuse(ReasonDirectIP, "only addresses handed out by capsem's DNS for allowed names can be dialled")
		}
		return
	}
	defer s.dns.release(entry)
	name := entry.name
	ev.Domain = name
	pol := s.policy.Load()
	dec := pol.DecideFlow(name, dst.Port())
	ev.MatchedRule = dec.Rule
	if !dec.Allowed {
		refuse(dec.Reason, "")
		return
	}
	if err := s.admit(); err != nil {
		s.stats.StoreRefusals.Add(1)
		refuse(ReasonStoreDown, err.Error())
		return
	}
	if !s.flowSlots.take() {
		s.stats.FlowsCapped.Add(1)
		refuse(ReasonFlowCap, fmt.Sprintf("%d flows are open (MaxFlows)", s.cfg.MaxFlows))
		return
	}
	defer s.flowSlots.give()

	start := time.Now()
	// The MCP gateway is served in this process: nothing is dialled, and
	// no [upstream] resolve entry can send it anywhere else.
	local := pol.MCPGateway(name)
	var upstream net.Conn
	var upAddr netip.AddrPort
	pooled := !local && s.cfg.Pooled != nil && s.cfg.Pooled(pol, name, dst.Port())
	if !local && !pooled {
		var reason string
		var err error
		upstream, upAddr, reason, err = s.dialUpstream(s.ctx, pol, name, dst.Port())
		if err != nil {
			deny(reason, err.Error())
			return
		}
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	r.Complete(false)
	ev.Decision = store.Allowed
	if terr != nil {
		if upstream != nil {
			upstream.Close()
		}
		ev.Reason, ev.Detail = ReasonHandshakeFailed, terr.String()
		s.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
		return
	}
	s.stats.FlowsAllowed.Add(1)
	guest := &guestConn{TCPConn: gonet.NewTCPConn(&wq, ep), ep: ep}
	flow := &Flow{Name: name, Port: dst.Port(), Guest: src, Dst: dst, Transport: store.TransportTCP,
		Current:  s.policy.Load,
		Local:    local,
		Pooled:   pooled,
		Redial:   s.redial(name, dst.Port(), local),
		Upstream: s.upstreamAddrs(name, dst.Port(), local),
	}
	if upstream != nil {
		flow.Dialed = pol
	}
	res := s.flows(s.ctx, guest, upstream, flow)
	guest.Close()

	s.stats.BytesToUpstream.Add(uint64(res.BytesSent))
	s.stats.BytesFromUpstream.Add(uint64(res.BytesReceived))
	ev.Reason = dec.Reason
	if res.Refused != "" {
		s.stats.FlowsAllowed.Add(^uint64(0))
		s.stats.FlowsDenied.Add(1)
		ev.Decision, ev.Reason = store.Denied, res.Refused
	}
	ev.BytesSent, ev.BytesReceived = res.BytesSent, res.BytesReceived
	ev.Duration = time.Since(start)
	switch {
	case local:
		ev.Detail = "served by capsem (the MCP gateway)"
	case pooled:
		ev.Detail = "upstream connections kept alive by the handler (none dialled for this flow)"
	default:
		ev.Detail = "upstream " + upAddr.String()
	}
	if res.ConnType != "" {
		ev.ConnType = res.ConnType
	}
	if res.Err != nil {
		ev.Detail += ": " + res.Err.Error()
	}
	s.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
}

// redial is a Flow's Redial: a TCP connection to name:port, decided again
// under pol.
func (s *Stack) redial(name string, port uint16, local bool) func(context.Context, *policy.Policy) (net.Conn, error) {
	return func(ctx context.Context, pol *policy.Policy) (net.Conn, error) {
		if local {
			return nil, fmt.Errorf("%s is served by capsem itself and has no upstream", name)
		}
		if d := pol.DecideFlow(name, port); !d.Allowed {
			return nil, fmt.Errorf("%s:%d is no longer allowed: %s", name, port, d.Reason)
		}
		c, _, _, err := s.dialUpstream(ctx, pol, name, port)
		return c, err
	}
}

// flowStart registers a flow unless the stack is closing.
func (s *Stack) flowStart() bool {
	s.flowMu.Lock()
	defer s.flowMu.Unlock()
	if s.closed.Load() {
		return false
	}
	s.flowsWG.Add(1)
	return true
}

// DialUpstream connects to name:port on the host's side as a flow's
// upstream is, under the policy in force: [upstream] resolve, and private
// answers refused unless allow_private. It does not decide whether name is
// allowed: its caller connects to what the policy file itself names (the
// url of an MCP gateway server).
func (s *Stack) DialUpstream(ctx context.Context, name string, port uint16) (net.Conn, error) {
	c, _, _, err := s.dialUpstream(ctx, s.policy.Load(), name, port)
	return c, err
}

// dialUpstream connects to the real endpoint of an allowed name
// (resolveUpstream says which).
func (s *Stack) dialUpstream(ctx context.Context, pol *policy.Policy, name string, port uint16) (net.Conn, netip.AddrPort, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	ips, port, reason, err := s.resolveUpstream(ctx, pol, name, port)
	if err != nil {
		return nil, netip.AddrPort{}, reason, err
	}
	return s.dialAddrs(ctx, ips, port)
}

// resolveUpstream returns the real addresses of an allowed name and the
// port to reach them on. A name pinned to a literal IP in [upstream]
// resolve is trusted as written; any other name is resolved by the host,
// and answers in loopback, private, link-local, metadata or other special
// ranges are refused unless the policy sets allow_private (DNS rebinding).
func (s *Stack) resolveUpstream(ctx context.Context, pol *policy.Policy, name string, port uint16) ([]netip.Addr, uint16, string, error) {
	host := name
	if t, ok := pol.Resolve(name); ok {
		host = t.Host
		if t.Port != 0 {
			port = t.Port
		}
		if t.Pinned {
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return nil, port, ReasonUpstreamNoAddr, fmt.Errorf("resolve target %q: %w", host, err)
			}
			return []netip.Addr{ip}, port, "", nil
		}
	}
	ips, err := s.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, port, ReasonUpstreamNoAddr, fmt.Errorf("host lookup of %s: %w", host, err)
	}
	var usable []netip.Addr
	var refused []string
	for _, ip := range ips {
		ip = ip.Unmap()
		if !pol.AllowPrivate && IsSpecialAddr(ip) {
			refused = append(refused, ip.String())
			continue
		}
		usable = append(usable, ip)
	}
	if len(usable) == 0 {
		if len(refused) > 0 {
			return nil, port, ReasonUpstreamPrivate,
				fmt.Errorf("%s resolved to %v, a private or special address; set [upstream] allow_private = true to allow it", host, refused)
		}
		return nil, port, ReasonUpstreamNoAddr, fmt.Errorf("host lookup of %s returned no address", host)
	}
	return usable, port, "", nil
}

// upstreamAddrs is a Flow's Upstream: the addresses of name:port, decided
// again under pol.
func (s *Stack) upstreamAddrs(name string, port uint16, local bool) func(context.Context, *policy.Policy) ([]netip.AddrPort, error) {
	return func(ctx context.Context, pol *policy.Policy) ([]netip.AddrPort, error) {
		if local {
			return nil, fmt.Errorf("%s is served by capsem itself and has no upstream", name)
		}
		if d := pol.DecideFlow(name, port); !d.Allowed {
			return nil, fmt.Errorf("%s:%d is no longer allowed: %s", name, port, d.Reason)
		}
		ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
		defer cancel()
		ips, p, _, err := s.resolveUpstream(ctx, pol, name, port)
		if err != nil {
			return nil, err
		}
		out := make([]netip.AddrPort, len(ips))
		for i, ip := range ips {
			out[i] = netip.AddrPortFrom(ip, p)
		}
		return out, nil
	}
}

func (s *Stack) dialAddrs(ctx context.Context, ips []netip.Addr, port uint16) (net.Conn, netip.AddrPort, string, error) {
	var errs []error
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip, port)
		c, err := s.cfg.Dial(ctx, "tcp", ap.String())
		if err == nil {
			return c, ap, "", nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, ReasonUpstreamFailed, errors.Join(errs...)
}

var specialPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // RFC 1918
		"100.64.0.0/10",   // carrier-grade NAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata
		"172.16.0.0/12",   // RFC 1918
		"192.0.0.0/24",    // IETF protocol assignments
		"192.168.0.0/16",  // RFC 1918
		"198.18.0.0/15",   // benchmarking: capsem's own guest link and pool
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"64:ff9b::/96",    // NAT64: may embed any IPv4 address
		"64:ff9b:1::/48",  // local-use NAT64
		"fc00::/7",        // unique local (includes fd00:ec2::254 metadata)
		"fe80::/10",       // link-local
		"ff00::/8",        // multicast
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4: embeds an IPv4 address
		"::ffff:0:0/96",   // IPv4-mapped (normally unmapped first)
		"100::/64",        // discard
		"2001::/23",       // IETF special purpose (Teredo etc.)
		"192.0.2.0/24",    // documentation
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// IsSpecialAddr reports whether ip is loopback, private, link-local,
// metadata, multicast or otherwise not a public unicast address: an upstream
// answer in these ranges is a DNS-rebinding attempt unless the policy says
// allow_private.
func IsSpecialAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range specialPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
