package netstack

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

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
		Direction: store.Outbound,
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
	current := s.policy.Load // what the flow's requests decide under
	if !dec.Allowed && dec.Ask {
		// A person is asked, unless they allowed the name once at its DNS
		// query and this is that connection.
		aq := ask.Network(name, dst.Port())
		var out ask.Outcome
		granted := (*policy.Policy)(nil)
		if by, ok := s.asks.takeOnce(name, dst.Port()); ok {
			granted, _ = pol.WithGrants(aq.Grants())
			out = ask.Outcome{Allowed: granted != nil, Answer: ask.Once, By: by, Reason: ask.ReasonAllowed}
		} else {
			granted, out = s.ask(aq, pol)
		}
		if out.By != "" {
			ev.MatchedRule = out.Rule(aq)
		}
		switch {
		case out.By == "": // nobody answered: as frequent as the guest makes it, so rate-limited
			refuse(out.Reason, out.Detail())
			return
		case !out.Allowed || granted == nil:
			deny(out.Reason, out.Detail())
			return
		}
		pol, dec = granted, granted.DecideFlow(name, dst.Port())
		if out.Answer == ask.Once {
			current = s.grantedCurrent(aq.Grants())
		}
		if dec.Allowed {
			dec.Reason = out.Reason // asked-allowed: a person, not the file, allowed it
		}
	}
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
	// A [[forward]] goes to exactly its host service, spliced: no
	// resolution, no private-address check (the user named the address),
	// no interception.
	fw, forwarded := pol.Forward(name, dst.Port())
	// The MCP gateway is served in this process: nothing is dialled, and
	// no [upstream] resolve entry can send it anywhere else.
	local := !forwarded && pol.MCPGateway(name)
	var upstream net.Conn
	var upWhere string
	pooled := !local && !forwarded && s.cfg.Pooled != nil && s.cfg.Pooled(pol, name, dst.Port())
	if forwarded {
		var err error
		if upstream, err = s.dialForward(s.ctx, fw); err != nil {
			deny(ReasonForwardFailed, err.Error())
			return
		}
	} else if !local && !pooled {
		var reason string
		var err error
		upstream, upWhere, reason, err = s.dialUpstream(s.ctx, pol, name, dst.Port())
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
		Current:  current,
		Local:    local,
		Pooled:   pooled,
		Redial:   s.redial(name, dst.Port(), local),
		Upstream: s.upstreamAddrs(name, dst.Port(), local),
	}
	if upstream != nil {
		flow.Dialed = pol
	}
	handler := s.flows
	if forwarded {
		handler = Splice
	}
	res := handler(s.ctx, guest, upstream, flow)
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
	case forwarded:
		ev.Detail = "forwarded to " + fw.Network + " " + fw.Addr
	case local:
		ev.Detail = "served by capsem (the MCP gateway)"
	case pooled:
		ev.Detail = "upstream connections kept alive by the handler (none dialled for this flow)"
	default:
		ev.Detail = "upstream " + upWhere
	}
	if res.ConnType != "" {
		ev.ConnType = res.ConnType
	}
	if res.Err != nil {
		ev.Detail += ": " + res.Err.Error()
	}
	s.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
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
