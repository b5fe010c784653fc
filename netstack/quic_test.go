package netstack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// quicInitial is an Initial-shaped datagram: first byte, version, an
// 8-byte DCID, no SCID, no token, and a length covering the rest, padded
// to 1,200 bytes. The payload is not a real protected packet: netstack
// looks at the long header only.
func quicInitial(first byte, version uint32, tag byte) []byte {
	b := make([]byte, quicMinInitialDatagram)
	b[0] = first
	binary.BigEndian.PutUint32(b[1:5], version)
	b[5] = 8
	for i := 6; i < 14; i++ {
		b[i] = tag
	}
	b[14] = 0 // SCID length
	b[15] = 0 // token length
	rest := len(b) - 18
	binary.BigEndian.PutUint16(b[16:18], 0x4000|uint16(rest))
	b[18] = tag // the packet number and payload
	return b
}

func TestIsQUICInitial(t *testing.T) {
	v1 := quicInitial(0xc3, quicV1, 1)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), v1...)) }
	for _, c := range []struct {
		b   []byte
		ok  bool
		why string
	}{
		{v1, true, "a v1 Initial (type 0b00)"},
		{quicInitial(0xd3, quicV2, 1), true, "a v2 Initial: v2 gives Initial the type bits 0b01"},
		{quicInitial(0xc3, quicV2, 1), false, "v2 type 0b00 is 0-RTT, not Initial"},
		{quicInitial(0xd3, quicV1, 1), false, "v1 type 0b01 is 0-RTT: refused (replayable), never a flow's start"},
		{quicInitial(0xe3, quicV1, 1), false, "v1 Handshake packet"},
		{quicInitial(0x43, quicV1, 1), false, "a short header (1-RTT) packet"},
		{quicInitial(0x83, quicV1, 1), false, "the fixed bit is clear"},
		{quicInitial(0xc3, 0, 1), false, "version 0 is version negotiation"},
		{quicInitial(0xc3, 0xff00001d, 1), false, "a draft version"},
		{v1[:quicMinInitialDatagram-1], false, "an Initial's datagram is at least 1,200 bytes (RFC 9000 §14.1)"},
		{mod(func(b []byte) []byte { b[5] = 7; return b }), false, "a client's first DCID is at least 8 bytes"},
		{mod(func(b []byte) []byte { b[5] = 21; return b }), false, "a DCID is at most 20 bytes"},
		{mod(func(b []byte) []byte { b[14] = 21; return b }), false, "an SCID is at most 20 bytes"},
		{mod(func(b []byte) []byte { b[15] = 0x7f; b[16] = 0xff; return b }), false, "a token longer than the datagram"},
		{mod(func(b []byte) []byte { b[16] = 0x7f; return b }), false, "a packet length longer than the datagram"},
		{mod(func(b []byte) []byte { b[16], b[17] = 0x40, 0; return b }), false, "a packet length of 0 has no packet number"},
		{mod(func(b []byte) []byte { b[16], b[17] = 0x40, 1; return b }), true, "a shorter packet, coalesced packets or padding after it"},
		{nil, false, "nothing"},
	} {
		if got := isQUICInitial(c.b); got != c.ok {
			t.Errorf("isQUICInitial = %v, want %v (%s)", got, c.ok, c.why)
		}
	}
}

// FuzzIsQUICInitial: the long-header check reads guest bytes; it must
// never panic, and what it accepts has the shape it promises.
func FuzzIsQUICInitial(f *testing.F) {
	f.Add(quicInitial(0xc3, quicV1, 1))
	f.Add(quicInitial(0xd3, quicV2, 1))
	f.Add(quicInitial(0x43, quicV1, 1))
	f.Add([]byte{0xc0, 0, 0, 0, 1, 20})
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isQUICInitial(b) {
			return
		}
		v := binary.BigEndian.Uint32(b[1:5])
		if len(b) < quicMinInitialDatagram || b[0]&0xc0 != 0xc0 || (v != quicV1 && v != quicV2) || b[5] < 8 || b[5] > 20 {
			t.Fatalf("accepted %x…", b[:min(len(b), 24)])
		}
	})
}

// recvQUICReply returns the next ICMP or UDP-from-443 frame to the guest,
// or nil after timeout.
func (g *guestSide) recvQUICReply(timeout time.Duration) []byte {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		f := g.recv(time.Until(deadline))
		if f == nil {
			return nil
		}
		ip := header.IPv4(f[header.EthernetMinimumSize:])
		switch ip.TransportProtocol() {
		case header.ICMPv4ProtocolNumber:
			return f
		case header.UDPProtocolNumber:
			if header.UDP(ip.Payload()).SourcePort() == portHTTPS {
				return f
			}
		}
	}
	return nil
}

// expectUnreachable checks that reply is ICMP port unreachable about the
// guest packet sent (a frame), from the address sent was for.
func expectUnreachable(t *testing.T, reply, sent []byte) {
	t.Helper()
	if reply == nil {
		t.Fatal("no ICMP port unreachable")
	}
	ip := header.IPv4(reply[header.EthernetMinimumSize:])
	orig := header.IPv4(sent[header.EthernetMinimumSize:])
	if ip.TransportProtocol() != header.ICMPv4ProtocolNumber || !ip.IsChecksumValid() {
		t.Fatalf("not a valid ICMP packet: %x", reply)
	}
	if ip.SourceAddress() != orig.DestinationAddress() || ip.DestinationAddress() != guestAddr {
		t.Fatalf("ICMP %s -> %s, want %s -> %s", ip.SourceAddress(), ip.DestinationAddress(), orig.DestinationAddress(), guestAddr)
	}
	icmp := header.ICMPv4(ip.Payload())
	if icmp.Type() != header.ICMPv4DstUnreachable || icmp.Code() != header.ICMPv4PortUnreachable {
		t.Fatalf("ICMP type %d code %d, want 3/3", icmp.Type(), icmp.Code())
	}
	if checksumOf(icmp) != 0xffff {
		t.Fatal("bad ICMP checksum")
	}
	if want := orig[:header.IPv4MinimumSize+8]; !bytes.Equal(icmp[header.ICMPv4MinimumSize:], want) {
		t.Fatalf("ICMP quotes %x, want the IP header and 8 bytes %x", icmp[header.ICMPv4MinimumSize:], want)
	}
}

// netEvent waits for the first net event with reason and returns it.
func (m *memRecorder) netEvent(t *testing.T, reason string) store.Net {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		m.mu.Lock()
		for _, ev := range m.evs {
			if ev.Net != nil && ev.Net.Reason == reason {
				m.mu.Unlock()
				return *ev.Net
			}
		}
		m.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s event in %v", reason, m.netReasons())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func quicFrame(sport uint16, dst netip.Addr, payload []byte) []byte {
	return udpFrame(guestMAC, GuestIP.As4(), dst.As4(), sport, portHTTPS, payload)
}

func TestQUICInitialToADirectIP(t *testing.T) {
	g := newGuestSide(t, `[network]
allow = ["a.test"]`, func(c *Config) { c.QUICFlows = echoOnce })
	sent := quicFrame(50000, netip.MustParseAddr("203.0.113.5"), quicInitial(0xc3, quicV1, 1))
	g.send(sent)
	expectUnreachable(t, g.recvQUICReply(2*time.Second), sent)
	ev := g.rec.netEvent(t, ReasonDirectIP)
	if ev.Transport != store.TransportUDP || ev.Decision != store.Denied || ev.Port != portHTTPS || ev.SrcPort != 50000 || ev.ConnType != store.ConnQUIC {
		t.Errorf("event %+v", ev)
	}
}

func TestQUICInitialRefusedLikeASYN(t *testing.T) {
	for _, c := range []struct {
		policy, reload string
		name           string
		handler        DatagramFlowHandler
		reason         string
		why            string
	}{
		{`[network]
allow = ["b.test:8443"]`, "", "b.test", echoOnce, policy.ReasonPortNotAllowed, "the name is allowed on another port only"},
		{`[network]
allow = ["b.test:8443"]
deny = ["b.test:443"]`, "", "b.test", echoOnce, policy.ReasonDeniedByRule, "a deny entry names the name on 443"},
		{`[network]
allow = ["a.test"]`, `[network]
allow = ["c.test"]`, "a.test", echoOnce, policy.ReasonNoMatchingRule, "a reload took the name's entry away after it resolved"},
		{`[network]
allow = ["a.test"]
[quic]
mode = "block"`, "", "a.test", echoOnce, ReasonQUICBlocked, "[quic] mode = \"block\" refuses QUIC to allowed names"},
		{`[network]
allow = ["a.test"]`, "", "a.test", nil, ReasonQUICUnserved, "no QUIC handler runs"},
		{`[network]
allow = ["a.test"]`, "", "a.test", func(context.Context, net.PacketConn, *Flow) FlowResult {
			return FlowResult{Refused: "tls-sni-mismatch"}
		}, "tls-sni-mismatch", "the handler refused the flow after looking into it"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			g := newGuestSide(t, c.policy, func(cfg *Config) { cfg.QUICFlows = c.handler })
			_, addr := g.resolve(c.name + ".")
			if !addr.IsValid() {
				t.Fatalf("%s did not resolve", c.name)
			}
			if c.reload != "" {
				g.s.SetPolicy(mustPolicy(t, c.reload))
			}
			sent := quicFrame(50000, addr, quicInitial(0xc3, quicV1, 1))
			g.send(sent)
			expectUnreachable(t, g.recvQUICReply(2*time.Second), sent)
			ev := g.rec.netEvent(t, c.reason)
			if ev.Transport != store.TransportUDP || ev.Decision != store.Denied || ev.Domain != c.name || ev.IP != addr {
				t.Errorf("event %+v (%s)", ev, c.why)
			}
		})
	}
}

// TestQUICInitialOnAnotherPort: a QUIC Initial to a port other than 443
// is decided as the same SYN would be — a name allowed on 443 only is
// port-not-allowed, an address capsem's DNS did not hand out is
// direct-ip — and answered with ICMP port unreachable, so the client
// gives up at once instead of waiting out its handshake. On a port the policy allows, capsem
// serves no QUIC there: quic-unserved, and the client falls back to TCP.
// A datagram that is no Initial is udp-not-allowed as before.
func TestQUICInitialOnAnotherPort(t *testing.T) {
	const port = 8443
	for _, c := range []struct {
		name, policy, to string
		initial          bool
		reason           string
		why              string
	}{
		{"port not allowed", `[network]
allow = ["a.test"]`, "a.test", true, policy.ReasonPortNotAllowed, "the name is allowed on 443 only: the SYN to 8443 is port-not-allowed"},
		{"direct ip", `[network]
allow = ["a.test"]`, "", true, ReasonDirectIP, "an address capsem's DNS did not hand out"},
		{"name denied", `[network]
allow = ["a.test"]
deny = ["a.test:8443"]`, "a.test", true, policy.ReasonDeniedByRule, "a deny entry names the port"},
		{"allowed port", `[network]
allow = ["a.test:8443"]`, "a.test", true, ReasonQUICUnserved, "allowed on 8443, where capsem serves TCP only"},
		{"not an initial", `[network]
allow = ["a.test"]`, "a.test", false, ReasonUDPNotAllowed, "other UDP is dropped as ever"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGuestSide(t, c.policy, func(cfg *Config) { cfg.QUICFlows = echoOnce })
			addr := netip.MustParseAddr("203.0.113.5")
			if c.to != "" {
				if _, addr = g.resolve(c.to + "."); !addr.IsValid() {
					t.Fatalf("%s did not resolve", c.to)
				}
			}
			payload := quicInitial(0xc3, quicV1, 1)
			if !c.initial {
				payload = append([]byte{0x43}, make([]byte, 1300)...)
			}
			sent := udpFrame(guestMAC, GuestIP.As4(), addr.As4(), 50010, port, payload)
			g.send(sent)
			reply := g.recvQUICReply(500 * time.Millisecond)
			if !c.initial {
				if reply != nil {
					t.Fatalf("answered a datagram that is no Initial: %x", reply)
				}
				g.rec.waitReason(t, ReasonUDPNotAllowed, 1)
				return
			}
			expectUnreachable(t, reply, sent)
			ev := g.rec.netEvent(t, c.reason)
			if ev.Transport != store.TransportUDP || ev.ConnType != store.ConnQUIC || ev.Decision != store.Denied || ev.Port != port || ev.IP != addr || ev.Domain != c.to || ev.SrcPort != 50010 {
				t.Errorf("event %+v (%s)", ev, c.why)
			}
			if n := g.rec.netReasons()[ReasonUDPNotAllowed]; n != 0 {
				t.Errorf("%d udp-not-allowed events besides (%s)", n, c.why)
			}
		})
	}
}

// echoOnce answers the flow's first datagram with "pong".
func echoOnce(ctx context.Context, pc net.PacketConn, f *Flow) FlowResult {
	buf := make([]byte, 2048)
	_, addr, err := pc.ReadFrom(buf)
	if err != nil {
		return FlowResult{Err: err}
	}
	pc.WriteTo([]byte("pong"), addr)
	return FlowResult{ConnType: store.ConnQUIC}
}

func TestQUICFlowCarriesDatagramsBothWays(t *testing.T) {
	type seen struct {
		flow             Flow
		local            net.Addr
		first, second    []byte
		from             net.Addr
		readErr, wrongTo error
	}
	got := make(chan seen, 1)
	handler := func(ctx context.Context, pc net.PacketConn, f *Flow) FlowResult {
		var s seen
		s.flow, s.local = *f, pc.LocalAddr()
		buf := make([]byte, 2048)
		n, from, err := pc.ReadFrom(buf)
		s.first, s.from, s.readErr = append([]byte(nil), buf[:n]...), from, err
		_, s.wrongTo = pc.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(198, 18, 0, 9), Port: 1})
		pc.WriteTo([]byte("pong"), from)
		n, _, err = pc.ReadFrom(buf)
		s.second = append([]byte(nil), buf[:n]...)
		if s.readErr == nil {
			s.readErr = err
		}
		f.Established()
		got <- s
		return FlowResult{ConnType: store.ConnQUIC}
	}
	g := newGuestSide(t, `[network]
allow = ["a.test"]`, func(c *Config) { c.QUICFlows = handler })
	_, addr := g.resolve("a.test.")
	initial := quicInitial(0xc3, quicV1, 7)
	g.send(quicFrame(50001, addr, initial))

	reply := g.recvQUICReply(2 * time.Second)
	if reply == nil {
		t.Fatal("no datagram from the handler")
	}
	ip := header.IPv4(reply[header.EthernetMinimumSize:])
	udp := header.UDP(ip.Payload())
	if ip.SourceAddress() != tcpip.AddrFrom4(addr.As4()) || ip.DestinationAddress() != guestAddr ||
		udp.SourcePort() != portHTTPS || udp.DestinationPort() != 50001 || string(udp.Payload()) != "pong" {
		t.Fatalf("reply %s:%d -> %s:%d %q, want from a.test's %s:443", ip.SourceAddress(), udp.SourcePort(),
			ip.DestinationAddress(), udp.DestinationPort(), udp.Payload(), addr)
	}
	if !udp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksumOf(udp.Payload())) {
		t.Fatal("bad UDP checksum")
	}
	short := append([]byte{0x43}, bytes.Repeat([]byte{9}, 40)...)
	g.send(quicFrame(50001, addr, short))

	var s seen
	select {
	case s = <-got:
	case <-time.After(3 * time.Second):
		t.Fatal("the handler did not get the second datagram")
	}
	wantFlow := netip.AddrPortFrom(addr, portHTTPS)
	for _, c := range []struct {
		ok  bool
		why string
	}{
		{s.readErr == nil && bytes.Equal(s.first, initial), "the Initial is the first datagram read"},
		{bytes.Equal(s.second, short), "a later datagram of the flow (short header) reaches it too"},
		{s.from.String() == "198.18.0.2:50001", "ReadFrom names the guest"},
		{s.local.String() == wantFlow.String(), "LocalAddr is where the guest sent"},
		{s.wrongTo != nil, "WriteTo refuses any address but the guest's"},
		{s.flow.Name == "a.test" && s.flow.Port == portHTTPS && s.flow.Dst == wantFlow && s.flow.Guest.Port() == 50001 &&
			s.flow.Transport == store.TransportUDP && s.flow.Current != nil && s.flow.Redial != nil, "the Flow is filled as for TCP"},
	} {
		if !c.ok {
			t.Errorf("%s: %+v", c.why, s)
		}
	}
	ev := g.rec.netEvent(t, policy.ReasonAllowed)
	if ev.Transport != store.TransportUDP || ev.ConnType != store.ConnQUIC || ev.Domain != "a.test" || ev.Decision != store.Allowed ||
		ev.BytesSent != int64(len(initial)+len(short)) || ev.BytesReceived != 4 || ev.SrcPort != 50001 || ev.Port != portHTTPS {
		t.Errorf("flow event %+v", ev)
	}
}

func TestQUICNonInitialWithoutAFlowIsDropped(t *testing.T) {
	g := newGuestSide(t, `[network]
allow = ["a.test"]`, func(c *Config) { c.QUICFlows = echoOnce })
	_, addr := g.resolve("a.test.")
	g.send(quicFrame(50002, addr, append([]byte{0x43}, make([]byte, 1300)...)))
	g.send(quicFrame(50002, addr, quicInitial(0xe3, quicV1, 1))) // a Handshake packet
	if f := g.recvQUICReply(300 * time.Millisecond); f != nil {
		t.Fatalf("answered a datagram that starts no flow: %x", f)
	}
	g.rec.waitReason(t, ReasonUDPNotAllowed, 2)
}

// blockingHandlers count the flows they are given and hold each until ctx
// is done; each calls Established once established is closed.
type blockingHandlers struct {
	started, establishedN atomic.Int64
	established           chan struct{}
}

func (b *blockingHandlers) handle(ctx context.Context, pc net.PacketConn, f *Flow) FlowResult {
	b.started.Add(1)
	if b.established != nil {
		select {
		case <-b.established:
			f.Established()
			b.establishedN.Add(1)
		case <-ctx.Done():
		}
	}
	<-ctx.Done()
	return FlowResult{}
}

func waitCount(t *testing.T, n *atomic.Int64, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, n.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestQUICInitialFloodIsCapped(t *testing.T) {
	h := &blockingHandlers{established: make(chan struct{})}
	g := newGuestSide(t, `[network]
allow = ["a.test"]`, func(c *Config) { c.QUICFlows = h.handle })
	_, addr := g.resolve("a.test.")
	for i := 0; i < DefaultMaxQUICHandshakes+1; i++ {
		g.send(quicFrame(uint16(1000+i), addr, quicInitial(0xc3, quicV1, byte(i))))
	}
	waitCount(t, &h.started, DefaultMaxQUICHandshakes, "handlers started")
	g.rec.waitReason(t, ReasonQUICFlood, 1)
	time.Sleep(50 * time.Millisecond)
	if n := h.started.Load(); n != DefaultMaxQUICHandshakes {
		t.Fatalf("%d handshakes started, want the cap, %d", n, DefaultMaxQUICHandshakes)
	}
	if d := g.s.Stats().FramesDropped.Load(); d < 1 {
		t.Errorf("FramesDropped = %d: the flood's drop is not counted", d)
	}
	// The handshakes complete: a client is served again at once.
	close(h.established)
	waitCount(t, &h.establishedN, DefaultMaxQUICHandshakes, "handshakes established")
	g.send(quicFrame(5000, addr, quicInitial(0xc3, quicV1, 1)))
	waitCount(t, &h.started, DefaultMaxQUICHandshakes+1, "handlers started after the flood")
	if n := g.rec.netReasons()[ReasonQUICFlood]; n != 1 {
		t.Errorf("%d quic-initial-flood drops, want 1", n)
	}
}

func TestQUICHandshakeSlotLapses(t *testing.T) {
	h := &blockingHandlers{} // never calls Established
	g := newGuestSide(t, `[network]
allow = ["a.test"]`, func(c *Config) {
		c.QUICFlows = h.handle
		c.MaxQUICHandshakes = 1
	})
	_, addr := g.resolve("a.test.")
	g.send(quicFrame(1000, addr, quicInitial(0xc3, quicV1, 1)))
	waitCount(t, &h.started, 1, "handlers started")
	g.send(quicFrame(1001, addr, quicInitial(0xc3, quicV1, 2)))
	g.rec.waitReason(t, ReasonQUICFlood, 1)
	time.Sleep(quicHandshakeWindow + 100*time.Millisecond)
	g.send(quicFrame(1002, addr, quicInitial(0xc3, quicV1, 3)))
	waitCount(t, &h.started, 2, "handlers started once the first flow's handshake window passed")
}

func TestQUICIdleFlowEnds(t *testing.T) {
	readErr := make(chan error, 1)
	handler := func(ctx context.Context, pc net.PacketConn, f *Flow) FlowResult {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				readErr <- err
				return FlowResult{}
			}
		}
	}
	g := newGuestSide(t, `[network]
allow = ["a.test"]`, func(c *Config) {
		c.QUICFlows = handler
		c.QUICIdleTimeout = 200 * time.Millisecond
	})
	_, addr := g.resolve("a.test.")
	g.send(quicFrame(50003, addr, quicInitial(0xc3, quicV1, 1)))
	select {
	case err := <-readErr:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadFrom of an idle flow: %v, want net.ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the idle flow did not end")
	}
	ev := g.rec.netEvent(t, policy.ReasonAllowed)
	if ev.Transport != store.TransportUDP || ev.ConnType != store.ConnQUIC || !strings.Contains(ev.Detail, "QUICIdleTimeout") {
		t.Errorf("event %+v", ev)
	}
	// The flow is gone: its datagrams are dropped again.
	g.send(quicFrame(50003, addr, append([]byte{0x43}, make([]byte, 100)...)))
	g.rec.waitReason(t, ReasonUDPNotAllowed, 1)
}

func TestUDPFlowConnDeadlinesAndClose(t *testing.T) {
	s, err := New(Config{Policy: mustPolicy(t, ""), Recorder: &memRecorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newUDPFlowConn(s, netip.MustParseAddrPort("198.19.0.1:443"), netip.MustParseAddrPort("198.18.0.2:4000"))
	buf := make([]byte, 16)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	_, _, err = c.ReadFrom(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("ReadFrom past its deadline: %v after %s", err, time.Since(start))
	}
	c.SetReadDeadline(time.Time{})
	c.push([]byte("0123456789abcdefXYZ"))
	if n, _, err := c.ReadFrom(buf); err != nil || n != 16 {
		t.Fatalf("ReadFrom: %d, %v; want the datagram cut to the buffer, like a UDP socket", n, err)
	}
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := c.WriteTo([]byte("x"), c.RemoteAddr()); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteTo past its deadline: %v", err)
	}
	c.SetDeadline(time.Time{})
	if n, err := c.WriteTo(make([]byte, DefaultMTU), c.RemoteAddr()); err != nil || n != DefaultMTU || s.Stats().QUICWritesTooBig.Load() != 1 {
		t.Fatalf("WriteTo beyond the MTU: %d, %v (%d counted); want it dropped without an error", n, err, s.Stats().QUICWritesTooBig.Load())
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.Close()
	}()
	if _, _, err := c.ReadFrom(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadFrom across Close: %v", err)
	}
	if _, err := c.WriteTo([]byte("x"), c.RemoteAddr()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WriteTo after Close: %v", err)
	}
}

func TestUDPFlowConnQueueDropsNewWhenFull(t *testing.T) {
	s, err := New(Config{Policy: mustPolicy(t, ""), Recorder: &memRecorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newUDPFlowConn(s, netip.MustParseAddrPort("198.19.0.1:443"), netip.MustParseAddrPort("198.18.0.2:4000"))
	first := bytes.Repeat([]byte{1}, 1200)
	c.push(first)
	for i := 0; i < maxQueuedDatagramBytes/1200+10; i++ {
		c.push(bytes.Repeat([]byte{2}, 1200))
	}
	if s.Stats().QUICQueueDrops.Load() == 0 {
		t.Fatal("a full queue dropped nothing")
	}
	if c.queued.Load() > maxQueuedDatagramBytes {
		t.Fatalf("%d bytes queued, more than %d", c.queued.Load(), maxQueuedDatagramBytes)
	}
	buf := make([]byte, 2048)
	if n, _, _ := c.ReadFrom(buf); !bytes.Equal(buf[:n], first) {
		t.Fatal("the first datagram (the Initial) was not kept: the queue must drop the new ones")
	}
}

// TestQUICRefusedBeforeHandshakeIsRateLimited: Initials the handler
// refuses at once (junk hellos) are recorded under the drop log's rate
// limit, as refused SYNs are, not one event each.
func TestQUICRefusedBeforeHandshakeIsRateLimited(t *testing.T) {
	var handled atomic.Int64
	g := newGuestSide(t, `[network]
allow = ["a.test"]`, func(c *Config) {
		c.QUICFlows = func(ctx context.Context, pc net.PacketConn, f *Flow) FlowResult {
			handled.Add(1)
			return FlowResult{Refused: "tls-bad-client-hello"}
		}
	})
	_, addr := g.resolve("a.test.")
	const n = 600
	for i := 0; i < n; i++ {
		g.send(quicFrame(uint16(2000+i), addr, quicInitial(0xc3, quicV1, byte(i))))
		if i%100 == 99 {
			waitCount(t, &handled, int64(i+1), "refused flows")
		}
	}
	waitCount(t, &handled, n, "refused flows")
	time.Sleep(50 * time.Millisecond)
	events := 0
	g.rec.mu.Lock()
	for _, ev := range g.rec.evs {
		if ev.Net != nil && ev.Net.Reason == "tls-bad-client-hello" {
			events++
		}
	}
	g.rec.mu.Unlock()
	if events == 0 || events > 100 {
		t.Errorf("%d events for %d refused Initials: want them recorded, under the rate limit", events, n)
	}
}
