package netstack

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/capsem/capsem/store"
)

// memRecorder keeps events in memory for unit tests. Admit returns
// admitErr, so a test can play a store that cannot write.
type memRecorder struct {
	mu       sync.Mutex
	evs      []store.Event
	admitErr error
}

func (m *memRecorder) Append(ev store.Event) {
	m.mu.Lock()
	m.evs = append(m.evs, ev)
	m.mu.Unlock()
}

func (m *memRecorder) Admit() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.admitErr
}

func (m *memRecorder) setAdmitErr(err error) {
	m.mu.Lock()
	m.admitErr = err
	m.mu.Unlock()
}

// dnsEvents returns the DNS events recorded so far.
func (m *memRecorder) dnsEvents() []store.DNS {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.DNS
	for _, ev := range m.evs {
		if ev.DNS != nil {
			out = append(out, *ev.DNS)
		}
	}
	return out
}

func (m *memRecorder) netReasons() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for _, ev := range m.evs {
		if ev.Net != nil {
			out[ev.Net.Reason] += ev.Net.Count
		}
	}
	return out
}

// waitReason waits until the recorder holds n drops for reason.
func (m *memRecorder) waitReason(t *testing.T, reason string, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for m.netReasons()[reason] < n {
		if time.Now().After(deadline) {
			t.Fatalf("events %v: want %d %s", m.netReasons(), n, reason)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var guestMAC = tcpip.LinkAddress([]byte{0x52, 0x54, 0, 0x12, 0x34, 0x56})

// guestSide is the test's end of a seqpacket socketpair whose other end the
// stack serves.
type guestSide struct {
	t   *testing.T
	c   net.Conn
	rec *memRecorder
	s   *Stack
}

// newGuestSide serves a stack under policyText; opts may change its
// Config before it is built.
func newGuestSide(t *testing.T, policyText string, opts ...func(*Config)) *guestSide {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := fileConn(t, fds[0]), fileConn(t, fds[1])
	rec := &memRecorder{}
	cfg := Config{Policy: mustPolicy(t, policyText), Recorder: rec}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		s.Serve(context.Background(), NewDatagramConn(theirs))
		close(done)
	}()
	t.Cleanup(func() {
		mine.Close()
		<-done
		s.Close()
	})
	return &guestSide{t: t, c: mine, rec: rec, s: s}
}

// fileConn turns a socket fd into a net.Conn, closing the fd (FileConn
// works on a dup).
func fileConn(t *testing.T, fd int) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socketpair")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (g *guestSide) send(frame []byte) {
	g.t.Helper()
	if _, err := g.c.Write(frame); err != nil {
		g.t.Fatal(err)
	}
}

// recv returns the next frame from the stack, or nil after timeout.
func (g *guestSide) recv(timeout time.Duration) []byte {
	buf := make([]byte, 70000)
	g.c.SetReadDeadline(time.Now().Add(timeout))
	n, err := g.c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

func ethFrame(src, dst tcpip.LinkAddress, typ tcpip.NetworkProtocolNumber, payload []byte) []byte {
	f := make([]byte, header.EthernetMinimumSize+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: src, DstAddr: dst, Type: typ})
	copy(f[header.EthernetMinimumSize:], payload)
	return f
}

func arpRequest(src tcpip.LinkAddress, sender, target [4]byte) []byte {
	a := header.ARP(make([]byte, header.ARPSize))
	a.SetIPv4OverEthernet()
	a.SetOp(header.ARPRequest)
	copy(a.HardwareAddressSender(), src)
	copy(a.ProtocolAddressSender(), sender[:])
	copy(a.ProtocolAddressTarget(), target[:])
	return ethFrame(src, header.EthernetBroadcastAddress, header.ARPProtocolNumber, a)
}

func TestGuardAnswersARPOnlyForTheGateway(t *testing.T) {
	g := newGuestSide(t, "")
	g.send(arpRequest(guestMAC, GuestIP.As4(), GatewayIP.As4()))
	reply := g.recv(2 * time.Second)
	if reply == nil {
		t.Fatal("no ARP reply for the gateway")
	}
	a := header.ARP(reply[header.EthernetMinimumSize:])
	if a.Op() != header.ARPReply || !bytes.Equal(a.HardwareAddressSender(), GatewayMAC) {
		t.Fatalf("bad ARP reply: op %d sender %x", a.Op(), a.HardwareAddressSender())
	}
	g.send(arpRequest(guestMAC, GuestIP.As4(), [4]byte{198, 18, 0, 9}))
	if f := g.recv(300 * time.Millisecond); f != nil {
		t.Fatalf("answered ARP for 198.18.0.9: %x", f)
	}
	if g.rec.netReasons()[ReasonARPNotGateway] != 1 {
		t.Errorf("events: %v, want one %s", g.rec.netReasons(), ReasonARPNotGateway)
	}
}

func TestGuardLocksTheGuestMAC(t *testing.T) {
	g := newGuestSide(t, "")
	g.send(arpRequest(guestMAC, GuestIP.As4(), GatewayIP.As4()))
	if g.recv(2*time.Second) == nil {
		t.Fatal("no ARP reply")
	}
	other := tcpip.LinkAddress([]byte{0x52, 0x54, 0, 0x99, 0x99, 0x99})
	g.send(arpRequest(other, GuestIP.As4(), GatewayIP.As4()))
	if f := g.recv(300 * time.Millisecond); f != nil {
		t.Fatal("a second MAC was answered")
	}
	g.send(ethFrame(tcpip.LinkAddress([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), tcpip.LinkAddress(GatewayMAC), header.IPv4ProtocolNumber, make([]byte, 20)))
	g.rec.waitReason(t, ReasonBadSourceMAC, 1)
	r := g.rec.netReasons()
	if r[ReasonSpoofedMAC] != 1 || r[ReasonBadSourceMAC] != 1 {
		t.Errorf("events %v, want one %s and one %s", r, ReasonSpoofedMAC, ReasonBadSourceMAC)
	}
}

func udpFrame(src tcpip.LinkAddress, srcIP, dstIP [4]byte, sport, dport uint16, payload []byte) []byte {
	return appendUDPFrame(nil, tcpip.LinkAddress(GatewayMAC), src, tcpip.AddrFrom4(srcIP), tcpip.AddrFrom4(dstIP), sport, dport, payload)
}

func TestGuardAnswersUDPDNSFromTheAskedResolver(t *testing.T) {
	g := newGuestSide(t, `[network]
allow = ["api.example.com"]`)
	q := query(t, "api.example.com.", dnsmessage.TypeA)
	g.send(udpFrame(guestMAC, GuestIP.As4(), [4]byte{1, 1, 1, 1}, 40000, 53, q))
	f := g.recv(2 * time.Second)
	if f == nil {
		t.Fatal("no DNS reply")
	}
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	if !ip.IsChecksumValid() || ip.SourceAddress() != tcpip.AddrFrom4([4]byte{1, 1, 1, 1}) || ip.DestinationAddress() != guestAddr {
		t.Fatalf("reply %s -> %s (checksum ok %v)", ip.SourceAddress(), ip.DestinationAddress(), ip.IsChecksumValid())
	}
	udp := header.UDP(ip.Payload())
	if udp.SourcePort() != 53 || udp.DestinationPort() != 40000 {
		t.Fatalf("reply ports %d -> %d", udp.SourcePort(), udp.DestinationPort())
	}
	if !udp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksumOf(udp.Payload())) {
		t.Fatal("bad UDP checksum")
	}
	h, ans := parseReply(t, udp.Payload())
	if h.RCode != dnsmessage.RCodeSuccess || len(ans) != 1 {
		t.Fatalf("rcode %v answers %d", h.RCode, len(ans))
	}
}

func checksumOf(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

func dhcpMessage(msgType byte, extra ...byte) []byte {
	b := make([]byte, dhcpMinLen)
	b[0], b[1], b[2] = 1, 1, 6
	binary.BigEndian.PutUint32(b[4:8], 0xdeadbeef)
	copy(b[28:34], guestMAC)
	binary.BigEndian.PutUint32(b[236:240], dhcpMagic)
	b = append(b, optMsgType, 1, msgType)
	b = append(b, extra...)
	return append(b, optEnd)
}

func TestDHCPOfferAndAck(t *testing.T) {
	g := newGuestSide(t, "")
	for _, c := range []struct {
		msg  []byte
		want byte
	}{
		{dhcpMessage(dhcpDiscover), dhcpOffer},
		{dhcpMessage(dhcpRequest, optRequested, 4, 198, 18, 0, 2, optServerID, 4, 198, 18, 0, 1), dhcpAck},
		{dhcpMessage(dhcpRequest, optRequested, 4, 10, 0, 0, 5), dhcpNak},
	} {
		g.send(udpFrame(guestMAC, [4]byte{}, [4]byte{255, 255, 255, 255}, 68, 67, c.msg))
		f := g.recv(2 * time.Second)
		if f == nil {
			t.Fatalf("no reply to DHCP type %d", c.msg[dhcpMinLen+2])
		}
		ip := header.IPv4(f[header.EthernetMinimumSize:])
		body := header.UDP(ip.Payload()).Payload()
		if body[0] != 2 || binary.BigEndian.Uint32(body[4:8]) != 0xdeadbeef {
			t.Fatalf("not a BOOTREPLY for our xid: %x", body[:8])
		}
		opts := map[byte][]byte{}
		for o := body[dhcpMinLen:]; len(o) > 1 && o[0] != optEnd; {
			if o[0] == optPad {
				o = o[1:]
				continue
			}
			opts[o[0]] = o[2 : 2+int(o[1])]
			o = o[2+int(o[1]):]
		}
		if got := opts[optMsgType]; len(got) != 1 || got[0] != c.want {
			t.Fatalf("reply type %v, want %d", got, c.want)
		}
		if c.want == dhcpNak {
			continue
		}
		if !bytes.Equal(body[16:20], []byte{198, 18, 0, 2}) ||
			!bytes.Equal(opts[optRouter], []byte{198, 18, 0, 1}) ||
			!bytes.Equal(opts[optDNS], []byte{198, 18, 0, 1}) ||
			!bytes.Equal(opts[optSubnetMask], []byte{255, 255, 255, 0}) ||
			binary.BigEndian.Uint16(opts[optMTU]) != DefaultMTU {
			t.Fatalf("lease: yiaddr %v opts %v", body[16:20], opts)
		}
	}
}

func TestGuardCountsIPv6AndStrayUDP(t *testing.T) {
	g := newGuestSide(t, "")
	ip6 := make([]byte, 40)
	ip6[0] = 0x60
	g.send(ethFrame(guestMAC, tcpip.LinkAddress(GatewayMAC), header.IPv6ProtocolNumber, ip6))
	g.send(udpFrame(guestMAC, GuestIP.As4(), [4]byte{203, 0, 113, 5}, 5000, 9999, []byte("x")))
	g.send(udpFrame(guestMAC, [4]byte{198, 18, 0, 66}, [4]byte{1, 1, 1, 1}, 5000, 53, []byte("x")))
	if f := g.recv(300 * time.Millisecond); f != nil {
		t.Fatalf("unexpected reply %x", f)
	}
	g.rec.waitReason(t, ReasonSpoofedIP, 1)
	r := g.rec.netReasons()
	if r[ReasonIPv6] != 1 || r[ReasonUDPNotAllowed] != 1 || r[ReasonSpoofedIP] != 1 {
		t.Errorf("events %v", r)
	}
	if g.s.Stats().IPv6Dropped.Load() != 1 {
		t.Errorf("IPv6Dropped = %d", g.s.Stats().IPv6Dropped.Load())
	}
}

func TestDropLogRateLimitsButCountsEverything(t *testing.T) {
	rec := &memRecorder{}
	d := newDropLog(rec, &Stats{})
	for i := 0; i < 1000; i++ {
		d.record(ReasonIPv6, store.TransportIPv6, netip.Addr{}, 0, "")
	}
	d.flush()
	if len(rec.evs) > dropBurst+1 {
		t.Errorf("%d events for 1000 drops, want at most %d", len(rec.evs), dropBurst+1)
	}
	if got := rec.netReasons()[ReasonIPv6]; got != 1000 {
		t.Errorf("events account for %d drops, want 1000", got)
	}
}

// discardConn is a FrameConn that swallows writes and has nothing to read.
type discardConn struct{}

func (discardConn) ReadFrame() ([]byte, error)         { return nil, io.EOF }
func (discardConn) FramingOverhead() int               { return 4 }
func (discardConn) WriteFrames([]byte, [][]byte) error { return nil }
func (discardConn) Close() error                       { return nil }

func TestWritePathDoesNotAllocatePerFrame(t *testing.T) {
	l := newLink(1500, tcpip.LinkAddress(GatewayMAC), &Stats{})
	defer l.attach(discardConn{})()
	var pkts stack.PacketBufferList
	for i := 0; i < 8; i++ {
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
			ReserveHeaderBytes: header.EthernetMinimumSize,
			Payload:            buffer.MakeWithData(make([]byte, 1400)),
		})
		pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
		l.AddHeader(pkt)
		pkts.PushBack(pkt)
	}
	defer pkts.DecRef()
	l.WritePackets(pkts) // warm the buffer
	if allocs := testing.AllocsPerRun(100, func() { l.WritePackets(pkts) }); allocs != 0 {
		t.Errorf("WritePackets allocates %.1f times per batch", allocs)
	}
}

func TestStreamReadPathDoesNotAllocatePerFrame(t *testing.T) {
	frame := make([]byte, 1514)
	var wire bytes.Buffer
	for i := 0; i < 300; i++ {
		binary.Write(&wire, binary.BigEndian, uint32(len(frame)))
		wire.Write(frame)
	}
	sc := NewStreamConn(&readOnlyConn{r: bytes.NewReader(wire.Bytes())})
	sc.ReadFrame()
	if allocs := testing.AllocsPerRun(200, func() { sc.ReadFrame() }); allocs != 0 {
		t.Errorf("ReadFrame allocates %.1f times per frame", allocs)
	}
}

func TestStreamFramingRoundTrip(t *testing.T) {
	var wire bytes.Buffer
	w := NewStreamConn(&writeOnlyConn{w: &wire})
	frames := [][]byte{bytes.Repeat([]byte{1}, 60), bytes.Repeat([]byte{2}, 1514), bytes.Repeat([]byte{3}, 65534)}
	for _, f := range frames {
		buf := append(make([]byte, 4), f...)
		if err := w.WriteFrames(buf, [][]byte{buf[4:]}); err != nil {
			t.Fatal(err)
		}
	}
	r := NewStreamConn(&readOnlyConn{r: &wire})
	for i, want := range frames {
		got, err := r.ReadFrame()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, err %v", i, len(got), err)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
	bad := NewStreamConn(&readOnlyConn{r: bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 1, 2})})
	if _, err := bad.ReadFrame(); err != ErrCorruptStream {
		t.Fatalf("huge length prefix: %v, want ErrCorruptStream", err)
	}
	short := NewStreamConn(&readOnlyConn{r: bytes.NewReader([]byte{0, 0, 0, 10, 1, 2})})
	if _, err := short.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated frame: %v, want ErrUnexpectedEOF", err)
	}
}

type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c *readOnlyConn) Read(p []byte) (int, error) { return c.r.Read(p) }

type writeOnlyConn struct {
	net.Conn
	w io.Writer
}

func (c *writeOnlyConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// FuzzFrameDecoder feeds arbitrary bytes through the QEMU stream decoder
// and every frame it yields through the guard: neither may panic.
func FuzzFrameDecoder(f *testing.F) {
	f.Add(append([]byte{0, 0, 0, 42}, arpRequest(guestMAC, GuestIP.As4(), GatewayIP.As4())...))
	f.Add(append([]byte{0, 0, 1, 0x20}, dhcpMessage(dhcpDiscover)...))
	q := udpFrame(guestMAC, GuestIP.As4(), [4]byte{8, 8, 8, 8}, 1234, 53, []byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1})
	f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(q))), q...))
	dh := udpFrame(guestMAC, [4]byte{}, [4]byte{255, 255, 255, 255}, 68, 67, dhcpMessage(dhcpRequest, optRequested, 4, 198, 18, 0, 2))
	f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(dh))), dh...))
	qi := udpFrame(guestMAC, GuestIP.As4(), [4]byte{198, 19, 0, 1}, 4433, portHTTPS, quicInitial(0xc3, quicV1, 1))
	f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(qi))), qi...))
	rec := &memRecorder{}
	s, err := New(Config{Policy: mustPolicy(f, dnsTestPolicy), Recorder: rec, MTU: MaxMTU})
	if err != nil {
		f.Fatal(err)
	}
	s.link.attach(discardConn{})
	f.Fuzz(func(t *testing.T, wire []byte) {
		sc := NewStreamConn(&readOnlyConn{r: bytes.NewReader(wire)})
		for {
			frame, err := sc.ReadFrame()
			if err != nil {
				break
			}
			s.inbound(frame, true)
		}
		s.groFlush()
		rec.mu.Lock()
		rec.evs = rec.evs[:0]
		rec.mu.Unlock()
	})
}

// countingConn counts the bytes of frames written to it.
type countingConn struct {
	discardConn
	mu    sync.Mutex
	bytes int
}

func (c *countingConn) WriteFrames(_ []byte, frames [][]byte) error {
	time.Sleep(time.Millisecond) // a slow guest
	c.mu.Lock()
	for _, f := range frames {
		c.bytes += len(f)
	}
	c.mu.Unlock()
	return nil
}

// TestWritePacketsLargerThanTheQueue hands the link one batch bigger than
// its queue: the producer must wait for the writer, not deadlock, and every
// byte must come out.
func TestWritePacketsLargerThanTheQueue(t *testing.T) {
	l := newLink(MaxMTU, tcpip.LinkAddress(GatewayMAC), &Stats{})
	c := &countingConn{}
	defer l.attach(c)()
	var pkts stack.PacketBufferList
	const n, size = 100, 60000 // 6 MB, more than maxPending
	for i := 0; i < n; i++ {
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(make([]byte, size))})
		pkts.PushBack(pkt)
	}
	defer pkts.DecRef()
	done := make(chan int, 1)
	go func() {
		written, _ := l.WritePackets(pkts)
		done <- written
	}()
	select {
	case written := <-done:
		if written != n {
			t.Fatalf("wrote %d of %d packets", written, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WritePackets deadlocked on a batch larger than the queue")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		got := c.bytes
		c.mu.Unlock()
		if got == n*size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes reached the guest", got, n*size)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDropFloodDoesNotAllocate: past the per-reason rate limit, a dropped
// frame costs no allocation, however its drop detail would be formatted.
func TestDropFloodDoesNotAllocate(t *testing.T) {
	s, err := New(Config{Policy: mustPolicy(t, ""), Recorder: &memRecorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.checkGuestMAC([]byte(guestMAC))
	other := tcpip.LinkAddress([]byte{0x52, 0x54, 0, 0x99, 0x99, 0x99})
	spoofed := arpRequest(other, GuestIP.As4(), GatewayIP.As4())
	ip6 := ethFrame(guestMAC, tcpip.LinkAddress(GatewayMAC), header.IPv6ProtocolNumber, make([]byte, 40))
	for i := 0; i < 2*dropBurst; i++ { // use up this second's individual events
		s.inbound(spoofed, false)
		s.inbound(ip6, false)
	}
	if n := testing.AllocsPerRun(200, func() {
		s.inbound(spoofed, false)
		s.inbound(ip6, false)
	}); n != 0 {
		t.Errorf("%.1f allocations per rate-limited drop", n)
	}
}
