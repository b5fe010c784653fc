package netstack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/capsem/capsem/store"
)

// tcpSYN is a guest SYN from sport to dst:dport.
func tcpSYN(sport uint16, dst netip.Addr, dport uint16) []byte {
	ip := make([]byte, header.IPv4MinimumSize+header.TCPMinimumSize)
	h := header.IPv4(ip)
	h.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.TCPProtocolNumber),
		SrcAddr: guestAddr, DstAddr: tcpip.AddrFrom4(dst.As4())})
	h.SetChecksum(^h.CalculateChecksum())
	t := header.TCP(ip[header.IPv4MinimumSize:])
	t.Encode(&header.TCPFields{SrcPort: sport, DstPort: dport, SeqNum: 1000, DataOffset: header.TCPMinimumSize,
		Flags: header.TCPFlagSyn, WindowSize: 65535})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, guestAddr, tcpip.AddrFrom4(dst.As4()), header.TCPMinimumSize)
	t.SetChecksum(^t.CalculateChecksum(xsum))
	return ethFrame(guestMAC, tcpip.LinkAddress(GatewayMAC), header.IPv4ProtocolNumber, ip)
}

// recvTCP returns the flags of the next TCP segment to the guest's sport,
// or 0 after timeout.
func (g *guestSide) recvTCP(sport uint16, timeout time.Duration) header.TCPFlags {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		f := g.recv(time.Until(deadline))
		if f == nil || !isIPv4TCP(f) {
			continue
		}
		t := header.TCP(header.IPv4(f[header.EthernetMinimumSize:]).Payload())
		if t.DestinationPort() == sport {
			return t.Flags()
		}
	}
	return 0
}

// resolve asks fake DNS for name over UDP and returns the reply's RCODE
// and address.
func (g *guestSide) resolve(name string) (dnsmessage.RCode, netip.Addr) {
	g.t.Helper()
	g.send(udpFrame(guestMAC, GuestIP.As4(), GatewayIP.As4(), 40000, 53, query(g.t, name, dnsmessage.TypeA)))
	for i := 0; i < 10; i++ {
		f := g.recv(2 * time.Second)
		if f == nil {
			break
		}
		if isIPv4TCP(f) {
			continue
		}
		h, ans := parseReply(g.t, header.UDP(header.IPv4(f[header.EthernetMinimumSize:]).Payload()).Payload())
		if len(ans) == 1 {
			return h.RCode, netip.AddrFrom4(ans[0].Body.(*dnsmessage.AResource).A)
		}
		return h.RCode, netip.Addr{}
	}
	g.t.Fatalf("no DNS reply for %s", name)
	return 0, netip.Addr{}
}

// fakeDialer stands in for the upstream: each dial gets one end of a pipe,
// or blocks until release is closed.
type fakeDialer struct {
	calls   atomic.Int64
	block   chan struct{} // nil: dials succeed at once
	mu      sync.Mutex
	peers   []net.Conn
	release sync.Once
}

func (d *fakeDialer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d.calls.Add(1)
	if d.block != nil {
		select {
		case <-d.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a, b := net.Pipe()
	d.mu.Lock()
	d.peers = append(d.peers, b)
	d.mu.Unlock()
	return a, nil
}

func (d *fakeDialer) unblock() {
	d.release.Do(func() {
		if d.block != nil {
			close(d.block)
		}
	})
}

const limitsPolicy = `
[network]
allow = ["api.example.com:443"]
[upstream]
resolve = { "api.example.com" = "192.0.2.1" }
`

// syncBuf is a log destination safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStoreDownFailsClosed: while the recorder cannot record (a full disk),
// no allowed name resolves and no flow is dialled; both are refused with
// store-unavailable, the user is told once, and all works again once the
// store recovers.
func TestStoreDownFailsClosed(t *testing.T) {
	d := &fakeDialer{}
	var logs syncBuf
	g := newGuestSide(t, limitsPolicy, func(c *Config) {
		c.Dial = d.dial
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	rc, addr := g.resolve("api.example.com.")
	if rc != dnsmessage.RCodeSuccess || !addr.IsValid() {
		t.Fatalf("healthy store: rcode %v addr %s", rc, addr)
	}

	g.rec.setAdmitErr(errors.New("store: events cannot be recorded: no space left on device"))
	if rc, _ := g.resolve("api.example.com."); rc != dnsmessage.RCodeServerFailure {
		t.Errorf("allowed name with the store down: rcode %v, want SERVFAIL", rc)
	}
	if rc, _ := g.resolve("evil.example."); rc != dnsmessage.RCodeNameError {
		t.Errorf("denied name with the store down: rcode %v, want NXDOMAIN (refusing needs no record)", rc)
	}
	g.send(tcpSYN(5001, addr, 443))
	if f := g.recvTCP(5001, 2*time.Second); !f.Contains(header.TCPFlagRst) {
		t.Errorf("SYN with the store down: flags %v, want RST", f)
	}
	g.send(tcpSYN(5002, addr, 443))
	g.recvTCP(5002, 2*time.Second)
	if n := d.calls.Load(); n != 0 {
		t.Errorf("%d upstream dials while events could not be recorded", n)
	}
	g.rec.waitReason(t, ReasonStoreDown, 2)
	refusedDNS := 0
	for _, ev := range g.rec.dnsEvents() {
		if ev.Reason == ReasonStoreDown && ev.Answer == "SERVFAIL" {
			refusedDNS++
		}
	}
	if refusedDNS != 1 {
		t.Errorf("%d DNS events with reason %s, want 1", refusedDNS, ReasonStoreDown)
	}

	g.rec.setAdmitErr(nil)
	if rc, _ := g.resolve("api.example.com."); rc != dnsmessage.RCodeSuccess {
		t.Errorf("after recovery: rcode %v", rc)
	}
	g.send(tcpSYN(5003, addr, 443))
	if f := g.recvTCP(5003, 2*time.Second); !f.Contains(header.TCPFlagSyn | header.TCPFlagAck) {
		t.Errorf("SYN after recovery: flags %v, want SYN-ACK", f)
	}
	if n := d.calls.Load(); n != 1 {
		t.Errorf("%d upstream dials after recovery, want 1", n)
	}
	out := logs.String()
	if strings.Count(out, "every new flow and DNS answer is refused") != 1 || strings.Count(out, "events are recorded again") != 1 {
		t.Errorf("want one warning when recording stops and one when it resumes; log:\n%s", out)
	}
}

// TestSYNCapDropsAreRecorded: SYNs beyond MaxInFlightSYN are dropped by
// gVisor's forwarder, which only counts them; each is recorded too.
func TestSYNCapDropsAreRecorded(t *testing.T) {
	d := &fakeDialer{block: make(chan struct{})}
	g := newGuestSide(t, limitsPolicy, func(c *Config) {
		c.Dial = d.dial
		c.MaxInFlightSYN = 2
	})
	defer d.unblock()
	_, addr := g.resolve("api.example.com.")
	for p := uint16(6000); p < 6005; p++ {
		g.send(tcpSYN(p, addr, 443))
	}
	g.rec.waitReason(t, ReasonSYNCap, 3)
	if got := g.s.Snapshot()["syn_inflight_drops"]; got != 3 {
		t.Errorf("gVisor counted %d drops, want 3", got)
	}
	time.Sleep(100 * time.Millisecond)
	if r := g.rec.netReasons()[ReasonSYNCap]; r != 3 {
		t.Errorf("%d syn-cap drops recorded, want 3", r)
	}
}

// TestConnectionCaps: beyond MaxFlows, and beyond MaxDNSTCPConns for port
// 53, a SYN gets a RST and an event.
func TestConnectionCaps(t *testing.T) {
	d := &fakeDialer{}
	g := newGuestSide(t, limitsPolicy, func(c *Config) {
		c.Dial = d.dial
		c.MaxFlows = 2
		c.MaxDNSTCPConns = 1
	})
	_, addr := g.resolve("api.example.com.")
	one := netip.MustParseAddr("1.1.1.1")
	for _, c := range []struct {
		sport uint16
		dst   netip.Addr
		port  uint16
		want  header.TCPFlags
		why   string
	}{
		{7001, one, 53, header.TCPFlagSyn | header.TCPFlagAck, "the first TCP/53 connection"},
		{7002, one, 53, header.TCPFlagRst, "a second TCP/53 connection: MaxDNSTCPConns is 1"},
		{7003, addr, 443, header.TCPFlagSyn | header.TCPFlagAck, "a flow: the second of MaxFlows 2"},
		{7004, addr, 443, header.TCPFlagRst, "a third flow: beyond MaxFlows"},
	} {
		g.send(tcpSYN(c.sport, c.dst, c.port))
		if f := g.recvTCP(c.sport, 2*time.Second); !f.Contains(c.want) {
			t.Errorf("port %d from %d: flags %v, want %v (%s)", c.port, c.sport, f, c.want, c.why)
		}
	}
	g.rec.waitReason(t, ReasonDNSTCPCap, 1)
	g.rec.waitReason(t, ReasonFlowCap, 1)
	if d.calls.Load() != 1 {
		t.Errorf("%d dials, want 1: the capped flow must not be dialled", d.calls.Load())
	}
}

// TestRefusedFlowsAreAggregated: refusals at the SYN are rate-limited per
// reason like drops, and every one is counted.
func TestRefusedFlowsAreAggregated(t *testing.T) {
	g := newGuestSide(t, "")
	const n = 300
	for p := uint16(0); p < n; p++ {
		g.send(tcpSYN(20000+p, netip.MustParseAddr("203.0.113.9"), 443))
	}
	deadline := time.Now().Add(5 * time.Second)
	for g.s.Stats().FlowsDenied.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	g.s.drops.flush()
	rows := 0
	g.rec.mu.Lock()
	for _, ev := range g.rec.evs {
		if ev.Net != nil && ev.Net.Reason == ReasonDirectIP {
			rows++
		}
	}
	g.rec.mu.Unlock()
	if got := g.rec.netReasons()[ReasonDirectIP]; got != n {
		t.Errorf("events count %d refused SYNs, want %d", got, n)
	}
	if rows > 2*dropBurst+2 {
		t.Errorf("%d events for %d refused SYNs within a second or two", rows, n)
	}
}

// TestDNSAnswersAreAggregated: a flood of queries costs the store a burst
// of events a second per reason, plus one aggregate whose Count is exact.
func TestDNSAnswersAreAggregated(t *testing.T) {
	rec := &memRecorder{}
	s, err := New(Config{Policy: mustPolicy(t, dnsTestPolicy), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	denied := query(t, "evil.example.", dnsmessage.TypeA)
	allowed := query(t, "api.example.com.", dnsmessage.TypeA)
	for i := 0; i < n; i++ {
		s.answerDNS(denied, GatewayIP, store.TransportUDP)
		s.answerDNS(allowed, GatewayIP, store.TransportTCP)
	}
	s.Close()
	counts := map[string]int64{}
	rows := 0
	for _, ev := range rec.dnsEvents() {
		rows++
		counts[ev.Reason] += max(ev.Count, 1)
	}
	if counts[ReasonDNSDeniedName] != n || counts[ReasonDNSAllowedName] != n {
		t.Errorf("events count %v, want %d of each", counts, n)
	}
	if rows > 4*dropBurst+4 {
		t.Errorf("%d DNS events for %d queries", rows, 2*n)
	}
}

// TestAggregatesAreFlushedWhenTheFloodStops: a suppressed count reaches
// the store about a second after the flood, not only at Close.
func TestAggregatesAreFlushedWhenTheFloodStops(t *testing.T) {
	rec := &memRecorder{}
	d := newDropLog(rec, &Stats{})
	for i := 0; i < dropBurst+7; i++ {
		d.record(ReasonIPv6, store.TransportIPv6, netip.Addr{}, 0, "")
	}
	d.flushStale(time.Now())
	if got := rec.netReasons()[ReasonIPv6]; got != dropBurst {
		t.Fatalf("before the window ends: %d counted, want %d", got, dropBurst)
	}
	d.flushStale(time.Now().Add(1100 * time.Millisecond))
	if got := rec.netReasons()[ReasonIPv6]; got != dropBurst+7 {
		t.Errorf("after the window: %d counted, want %d", got, dropBurst+7)
	}
	d.flush()
	if got := rec.netReasons()[ReasonIPv6]; got != dropBurst+7 {
		t.Errorf("a flush after the stale flush counted again: %d", got)
	}
}

// TestDHCPAnswersAreAggregated: DHCP messages are rate-limited like drops.
func TestDHCPAnswersAreAggregated(t *testing.T) {
	g := newGuestSide(t, "")
	const n = 200
	for i := 0; i < n; i++ {
		g.send(udpFrame(guestMAC, [4]byte{}, [4]byte{255, 255, 255, 255}, 68, 67, dhcpMessage(dhcpDiscover)))
		g.recv(time.Second)
	}
	// The reply goes to the guest before its event is recorded, so the last
	// offer's event may come after the last recv: flush until it is in (or
	// the deadline passes and the assertion below says what is missing).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		g.s.drops.flush()
		if g.rec.netReasons()["dhcp-offer"] == n || time.Now().After(deadline) {
			break
		}
	}
	rows := 0
	g.rec.mu.Lock()
	for _, ev := range g.rec.evs {
		if ev.Net != nil && ev.Net.Reason == "dhcp-offer" {
			rows++
		}
	}
	g.rec.mu.Unlock()
	if got := g.rec.netReasons()["dhcp-offer"]; got != n || rows > 2*dropBurst+2 {
		t.Errorf("%d offers counted in %d events; want %d in at most %d", got, rows, n, 2*dropBurst+2)
	}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// TestSpliceCarriesAResetThrough: when the upstream resets mid-stream the
// guest's connection is reset too, not closed as if the stream were done.
func TestSpliceCarriesAResetThrough(t *testing.T) {
	guestApp, guestEnd := tcpPair(t)
	upEnd, upApp := tcpPair(t)
	done := make(chan FlowResult, 1)
	go func() { done <- Splice(context.Background(), guestEnd, upEnd, nil) }()
	upApp.Write([]byte("partial body"))
	time.Sleep(50 * time.Millisecond)
	upApp.SetLinger(0)
	upApp.Close()
	got, err := io.ReadAll(guestApp)
	if string(got) != "partial body" || !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("guest read %q then %v, want the bytes then a reset", got, err)
	}
	guestApp.Close()
	select {
	case res := <-done:
		if res.Err == nil || !strings.Contains(res.Err.Error(), "reset") {
			t.Errorf("flow result error %v, want the upstream's reset", res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Splice did not end")
	}
}

// FuzzDNSOverTCP feeds arbitrary bytes as a guest's TCP/53 stream: the
// server must not panic, and every answer it writes is one length-prefixed
// DNS message that parses.
func FuzzDNSOverTCP(f *testing.F) {
	one := query(f, "api.example.com.", dnsmessage.TypeA)
	f.Add(append(binary.BigEndian.AppendUint16(nil, uint16(len(one))), one...))
	two := append(binary.BigEndian.AppendUint16(nil, uint16(len(one))), one...)
	f.Add(append(two, two...))
	f.Add([]byte{0xff, 0xff, 1, 2, 3})
	f.Add([]byte{0, 3, 1, 2, 3, 0, 12})
	s, err := New(Config{Policy: mustPolicy(f, dnsTestPolicy), Recorder: &memRecorder{}})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	f.Fuzz(func(t *testing.T, stream []byte) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		srv, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			s.serveTCPDNS(srv, GatewayIP)
			close(done)
		}()
		c.Write(stream)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		out, _ := io.ReadAll(c)
		<-done
		for len(out) > 0 {
			if len(out) < 2 || len(out) < 2+int(binary.BigEndian.Uint16(out)) {
				t.Fatalf("truncated answer frame: %x", out)
			}
			n := int(binary.BigEndian.Uint16(out))
			var p dnsmessage.Parser
			if _, err := p.Start(out[2 : 2+n]); err != nil {
				t.Fatalf("answer does not parse: %v", err)
			}
			out = out[2+n:]
		}
	})
}
