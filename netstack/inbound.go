package netstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/capsem/capsem/store"
)

// Inbound connections: a way into the guest for a port published on the
// host (the sandbox's ports, capsem-net's expose). The host side accepts a
// connection and hands it here; the stack opens a TCP connection from the
// gateway to the guest's port, splices the two, and records the flow with
// direction inbound. It is the only way a connection into the guest is
// made, and only the host's side makes one: the guest's own SYNs to the
// gateway are refused as ever (gateway-port-closed).
//
// An inbound connection counts against MaxFlows like the guest's own, and
// is refused like them when its event cannot be recorded. The guest's
// server sees the gateway (198.18.0.1) as its peer; the host peer's
// address is in the event (src_ip, src_port).

// DefaultInboundDialTimeout bounds the connect into the guest: a guest
// that answers nothing (no server and a firewall that drops, or a guest
// stopped) holds the host's client for this long before it is reset.
const DefaultInboundDialTimeout = 5 * time.Second

// Inbound describes one connection accepted on a published port.
type Inbound struct {
	// Port is the guest's port the connection goes to.
	Port uint16
	// Peer is the host-side client's address (the event's src_ip and
	// src_port).
	Peer netip.AddrPort
	// Rule is what published the port, for the event's matched_rule
	// ("127.0.0.1:8080:80/tcp", say).
	Rule string
	// Detail is added to the event's detail (where it was published).
	Detail string
}

// Inbound carries client, a connection accepted on a published host
// port, into the guest's port in.Port until either side ends or ctx is
// done, and records it. It closes client. The error says why nothing was
// carried (the guest refused, the flow cap, the store); the event says it
// too.
func (s *Stack) Inbound(ctx context.Context, client net.Conn, in Inbound) error {
	defer client.Close()
	if !s.flowStart() {
		return errors.New("netstack: the sandbox's network is shutting down")
	}
	defer s.flowsWG.Done()
	ev := store.Net{
		Transport:   store.TransportTCP,
		ConnType:    store.ConnTCP,
		Direction:   store.Inbound,
		IP:          GuestIP,
		Port:        in.Port,
		SrcIP:       in.Peer.Addr(),
		SrcPort:     in.Peer.Port(),
		MatchedRule: in.Rule,
		Count:       1,
	}
	fail := func(reason string, err error) error {
		s.stats.FlowsDenied.Add(1)
		ev.Decision, ev.Reason, ev.Detail = store.Denied, reason, join(in.Detail, err.Error())
		s.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
		return fmt.Errorf("netstack: %s: %w", reason, err)
	}
	if err := s.admit(); err != nil {
		s.stats.StoreRefusals.Add(1)
		return fail(ReasonStoreDown, err)
	}
	if !s.flowSlots.take() {
		s.stats.FlowsCapped.Add(1)
		return fail(ReasonFlowCap, fmt.Errorf("%d flows are open (MaxFlows)", s.cfg.MaxFlows))
	}
	defer s.flowSlots.give()

	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, DefaultInboundDialTimeout)
	guest, err := s.dialGuest(dctx, in.Port)
	cancel()
	if err != nil {
		return fail(ReasonGuestRefused, fmt.Errorf("nothing in the guest accepted the connection on port %d (a server must listen on 0.0.0.0 or %s, not 127.0.0.1): %w", in.Port, GuestIP, err))
	}
	s.stats.FlowsAllowed.Add(1)
	// Carried until the host side ends it (ctx: the port unpublished) or
	// the stack closes.
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	unhook := context.AfterFunc(s.ctx, stop)
	defer unhook()
	// Splice's "upstream" is the host's client here: BytesSent is what
	// the guest sent it, as for every flow.
	res := Splice(fctx, guest, client, &Flow{Port: in.Port, Guest: netip.AddrPortFrom(GuestIP, in.Port), Transport: store.TransportTCP})
	if ctx.Err() != nil && res.Err == nil {
		res.Err = fmt.Errorf("cut: %w", context.Cause(ctx))
	}
	guest.Close()
	s.stats.BytesToUpstream.Add(uint64(res.BytesSent))
	s.stats.BytesFromUpstream.Add(uint64(res.BytesReceived))
	ev.Decision, ev.Reason, ev.Detail = store.Allowed, ReasonPublished, in.Detail
	ev.BytesSent, ev.BytesReceived, ev.Duration = res.BytesSent, res.BytesReceived, time.Since(start)
	if res.Err != nil {
		ev.Detail = join(ev.Detail, res.Err.Error())
	}
	s.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
	return nil
}

// dialGuest connects to the guest's port. A guest that has sent nothing
// since the stack started has no neighbour entry yet: the stack asks for
// its MAC, and the guest's answer locks it (checkGuestMAC), whose static
// entry ends the pending resolution with "no route to host" — measured:
// the first inbound connection after every start failed so, in 46 ms,
// and the next one went through. That error is tried again, a few
// times, within ctx.
func (s *Stack) dialGuest(ctx context.Context, port uint16) (*gonet.TCPConn, error) {
	addr := tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(GuestIP.As4()), Port: port}
	unreachable := (&tcpip.ErrHostUnreachable{}).String()
	for try := 1; ; try++ {
		c, err := gonet.DialContextTCP(ctx, s.gs, addr, ipv4.ProtocolNumber)
		if err == nil || try == 5 || !strings.Contains(err.Error(), unreachable) {
			return c, err
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// join joins two details with ": ", either may be empty.
func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}
