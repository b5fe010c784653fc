package netstack

import (
	"bytes"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// captureDispatcher records what the link hands to gVisor.
type captureDispatcher struct{ frames [][]byte }

func (c *captureDispatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	var b []byte // AsSlices covers the consumed link header too
	for _, s := range pkt.AsSlices() {
		b = append(b, s...)
	}
	c.frames = append(c.frames, b)
}

func (c *captureDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func tcpSegment(seq, ack uint32, flags header.TCPFlags, payload []byte) []byte {
	const hl = header.EthernetMinimumSize + header.IPv4MinimumSize + header.TCPMinimumSize
	f := make([]byte, hl+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: guestMAC, DstAddr: tcpip.LinkAddress(GatewayMAC), Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	dst := tcpip.AddrFrom4([4]byte{198, 19, 0, 1})
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.TCPProtocolNumber), SrcAddr: guestAddr, DstAddr: dst})
	ip.SetChecksum(^ip.CalculateChecksum())
	t := header.TCP(ip[header.IPv4MinimumSize:])
	t.Encode(&header.TCPFields{SrcPort: 40000, DstPort: 443, SeqNum: seq, AckNum: ack, DataOffset: header.TCPMinimumSize, Flags: flags, WindowSize: 512})
	copy(t[header.TCPMinimumSize:], payload)
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, guestAddr, dst, uint16(len(t)))
	xsum = checksum.Checksum(payload, xsum)
	t.SetChecksum(^t.CalculateChecksum(xsum))
	return f
}

func newGROStack(t *testing.T) (*Stack, *captureDispatcher) {
	t.Helper()
	s, err := New(Config{Policy: mustPolicy(t, ""), Recorder: &memRecorder{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := &captureDispatcher{}
	s.link.Attach(c)
	return s, c
}

func checkSegment(t *testing.T, frame []byte, wantSeq uint32, wantPayload []byte) {
	t.Helper()
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if !ip.IsValid(len(ip)) || !ip.IsChecksumValid() {
		t.Fatalf("bad IPv4 header (total length %d of %d)", ip.TotalLength(), len(ip))
	}
	tcp := header.TCP(ip.Payload())
	payload := tcp[tcp.DataOffset():]
	if tcp.SequenceNumber() != wantSeq || !bytes.Equal(payload, wantPayload) {
		t.Fatalf("segment seq %d with %d bytes, want seq %d with %d bytes", tcp.SequenceNumber(), len(payload), wantSeq, len(wantPayload))
	}
}

func TestGROMergesInOrderSegments(t *testing.T) {
	s, c := newGROStack(t)
	p1, p2, p3 := bytes.Repeat([]byte{1}, 701), bytes.Repeat([]byte{2}, 1000), bytes.Repeat([]byte{3}, 333)
	s.inbound(tcpSegment(1000, 77, header.TCPFlagAck, p1), true)
	s.inbound(tcpSegment(1701, 77, header.TCPFlagAck, p2), true)
	s.inbound(tcpSegment(2701, 77, header.TCPFlagAck|header.TCPFlagPsh, p3), true)
	if len(c.frames) != 1 {
		t.Fatalf("delivered %d segments, want 1 merged", len(c.frames))
	}
	checkSegment(t, c.frames[0], 1000, append(append(append([]byte{}, p1...), p2...), p3...))
	if f := header.TCP(header.IPv4(c.frames[0][header.EthernetMinimumSize:]).Payload()).Flags(); f != header.TCPFlagAck|header.TCPFlagPsh {
		t.Errorf("merged flags %v, want ACK|PSH", f)
	}
}

func TestGROKeepsSegmentsApartWhenItMust(t *testing.T) {
	s, c := newGROStack(t)
	p := bytes.Repeat([]byte{9}, 500)
	s.inbound(tcpSegment(1000, 77, header.TCPFlagAck, p), true)
	s.inbound(tcpSegment(1500, 78, header.TCPFlagAck, p), true) // new ACK number
	s.inbound(tcpSegment(3000, 78, header.TCPFlagAck, p), true) // sequence gap
	win := tcpSegment(3500, 78, header.TCPFlagAck, p)
	header.TCP(win[header.EthernetMinimumSize+header.IPv4MinimumSize:]).SetWindowSize(1024) // new window
	s.inbound(win, true)
	s.inbound(tcpSegment(4000, 78, header.TCPFlagAck, p), false) // nothing more waiting
	s.groFlush()
	if len(c.frames) != 5 {
		t.Fatalf("delivered %d segments, want 5 separate ones", len(c.frames))
	}
	if !bytes.Equal(c.frames[3], win) {
		t.Error("a segment that was not merged was altered")
	}
}
