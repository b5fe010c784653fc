package netstack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// gro coalesces back-to-back, in-order TCP segments of one flow into one
// large segment before gVisor sees them (receive offload, done in software
// the way Linux GRO does it). gVisor's cost is per segment — parsing,
// queueing to its processor goroutine, an ACK decision — so when a bulk
// upload has queued many MTU-sized frames in the read buffer, handing them
// over as one segment cuts that cost by the merge factor. It only engages
// when more frames are already waiting: an idle link is never delayed.
//
// Segments merge only when they could not be told apart by the receiver:
// same 4-tuple, contiguous sequence numbers, identical ACK number, window
// and TCP options, flags ACK only (a PSH ends a merge), no IP options or
// fragments. Transport checksums are not involved: the link trusts them
// (see link.Capabilities).
type gro struct {
	buf     []byte // the merged frame: Ethernet + IPv4 + TCP + payload
	n       int    // segments in buf
	nextSeq uint32
}

// groMaxIP is the largest IPv4 packet a merge may grow to.
const groMaxIP = 65535

// groTCP returns the TCP header and payload of a frame that may take part
// in a merge.
func groTCP(ip header.IPv4) (header.TCP, []byte, bool) {
	if ip.HeaderLength() != header.IPv4MinimumSize {
		return nil, nil, false
	}
	t := header.TCP(ip.Payload())
	if len(t) < header.TCPMinimumSize {
		return nil, nil, false
	}
	off := int(t.DataOffset())
	if off < header.TCPMinimumSize || off > len(t) {
		return nil, nil, false
	}
	if f := t.Flags(); f&^(header.TCPFlagAck|header.TCPFlagPsh) != 0 || f&header.TCPFlagAck == 0 {
		return nil, nil, false
	}
	payload := t[off:]
	if len(payload) == 0 {
		return nil, nil, false
	}
	return t, payload, true
}

// add offers one guarded TCP frame. more says whether further frames are
// already waiting to be read. It returns false when the caller must deliver
// the frame itself (after flushing).
func (s *Stack) groAdd(frame []byte, more bool) bool {
	g := &s.gro
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	t, payload, ok := groTCP(ip)
	if !ok {
		s.groFlush()
		return false
	}
	if g.n > 0 && g.canMerge(t, ip, len(payload)) {
		g.buf = append(g.buf, payload...)
		g.nextSeq += uint32(len(payload))
		g.n++
		if t.Flags()&header.TCPFlagPsh != 0 {
			s.mergedTCP().SetFlags(uint8(header.TCPFlagAck | header.TCPFlagPsh))
			s.groFlush()
		} else if !more {
			s.groFlush()
		}
		return true
	}
	s.groFlush()
	if !more || t.Flags()&header.TCPFlagPsh != 0 || int(ip.TotalLength()) > groMaxIP/2 {
		return false // nothing (or no room) to merge with: deliver as is
	}
	g.buf = append(g.buf[:0], frame[:header.EthernetMinimumSize+int(ip.TotalLength())]...)
	g.n = 1
	g.nextSeq = t.SequenceNumber() + uint32(len(payload))
	return true
}

func (g *gro) canMerge(t header.TCP, ip header.IPv4, n int) bool {
	mip := header.IPv4(g.buf[header.EthernetMinimumSize:])
	mt := header.TCP(mip.Payload())
	if len(g.buf)-header.EthernetMinimumSize+n > groMaxIP {
		return false
	}
	if mip.SourceAddress() != ip.SourceAddress() || mip.DestinationAddress() != ip.DestinationAddress() ||
		mt.SourcePort() != t.SourcePort() || mt.DestinationPort() != t.DestinationPort() {
		return false
	}
	if t.SequenceNumber() != g.nextSeq || t.AckNumber() != mt.AckNumber() || t.WindowSize() != mt.WindowSize() {
		return false
	}
	off := int(t.DataOffset())
	if off != int(mt.DataOffset()) || string(t[header.TCPMinimumSize:off]) != string(mt[header.TCPMinimumSize:off]) {
		return false
	}
	return true
}

func (s *Stack) mergedTCP() header.TCP {
	return header.TCP(header.IPv4(s.gro.buf[header.EthernetMinimumSize:]).Payload())
}

// groFlush delivers the merged segment, if any.
func (s *Stack) groFlush() {
	g := &s.gro
	if g.n == 0 {
		return
	}
	ip := header.IPv4(g.buf[header.EthernetMinimumSize:])
	if g.n > 1 {
		binary.BigEndian.PutUint16(ip[2:4], uint16(len(g.buf)-header.EthernetMinimumSize))
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
		s.stats.GROSegments.Add(uint64(g.n))
		s.stats.GROMerged.Add(1)
	}
	s.link.deliver(g.buf)
	g.n = 0
	g.buf = g.buf[:0]
}
