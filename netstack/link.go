package netstack

import (
	"iter"
	"net"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Direction of a frame, for taps such as the pcap writer.
type Direction int

const (
	// FromGuest is a frame the guest sent.
	FromGuest Direction = iota
	// ToGuest is a frame the stack sent to the guest.
	ToGuest
)

// FrameTap sees every frame in both directions. It must not retain frame.
type FrameTap func(dir Direction, frame []byte)

// maxPending bounds the bytes queued for the guest. A producer that finds
// the queue full waits for the writer (backpressure), as a blocking socket
// write would; nothing is dropped.
const maxPending = 4 << 20

// link is capsem's gVisor link endpoint. It is written for this job rather
// than taken from gvisor-tap-vsock, whose endpoint takes a global lock and
// allocates per frame: here outbound frames are appended, framing included,
// to one reused queue buffer and written a batch per call (large packets,
// on the stream transport, are held by reference instead and written from
// gVisor's buffers: zeroCopyMin). On an idle link
// the producer writes its own frames at once; while a write is in progress,
// frames accumulate and the writer goroutine sends them together (under
// load, dozens of frames per syscall). Inbound frames pass the guard in
// guard.go before gVisor sees them.
type link struct {
	mtu atomic.Uint32
	mac tcpip.LinkAddress

	dmu        sync.RWMutex
	dispatcher stack.NetworkDispatcher

	mu      sync.Mutex
	work    *sync.Cond // the writer waits here for frames
	space   *sync.Cond // producers wait here while the queue is full
	conn    FrameConn  // nil when no guest is attached
	over    int        // framing bytes the transport reserves per frame
	vec     vecWriter  // conn, when it writes frames given in pieces
	pending []byte     // queued frames, each after over reserved bytes
	spans   []span     // where each queued frame sits in pending
	held    int        // bytes of the queued packets held by reference (span.pkt)
	tap     FrameTap

	// The writing token: whoever holds it (a producer on an idle link,
	// else the writer goroutine) owns the spare buffers below.
	writing    bool
	spare      []byte
	spareSpans []span
	frames     [][]byte
	vecs       []frameVec
	parts      [][]byte
	tapBuf     []byte

	stats *Stats
}

// span is a queued frame: its bytes in pending after over reserved ones
// or, for a large packet of gVisor's written without a copy, those
// reserved bytes alone (start == end) and pkt, held until written.
type span struct {
	start, end int
	pkt        *stack.PacketBuffer
}

// zeroCopyMin is the smallest packet written from gVisor's own buffers
// (writev) rather than copied into the queue, on a transport that can
// (vecWriter: the stream socket). A jumbo download spent 11 % of
// capsem-net's CPU copying segments into the queue (memmove under
// WritePackets, MTU 65520, 7.6 Gbit/s to the guest); below a few KiB the
// copy is cheaper than an iovec and a reference held per frame.
const zeroCopyMin = 16 << 10

// vecWriter is a FrameConn that writes frames given in pieces, the way
// writev does.
type vecWriter interface {
	WriteFrameVecs(frames []frameVec) error
}

// frameVec is one frame in pieces: head is the transport's FramingOverhead
// reserved bytes before it, n the frame's length.
type frameVec struct {
	head  []byte
	parts [][]byte
	n     int
}

var _ stack.LinkEndpoint = (*link)(nil)

func newLink(mtu uint32, mac tcpip.LinkAddress, stats *Stats) *link {
	l := &link{mac: mac, stats: stats}
	l.work = sync.NewCond(&l.mu)
	l.space = sync.NewCond(&l.mu)
	l.mtu.Store(mtu)
	return l
}

// attach points the link at a guest connection and starts its writer. The
// returned func detaches it and waits for the writer to stop; frames still
// queued then are discarded (the guest is gone).
func (l *link) attach(c FrameConn) (detach func()) {
	l.mu.Lock()
	l.conn = c
	l.over = c.FramingOverhead()
	l.vec, _ = c.(vecWriter)
	l.releaseLocked()
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.writeLoop(c)
	}()
	return func() {
		l.mu.Lock()
		l.conn = nil
		l.releaseLocked()
		l.work.Broadcast()
		l.space.Broadcast()
		l.mu.Unlock()
		<-done
	}
}

// writeLoop writes queued frames to c while no producer is writing them
// itself, until c is detached.
func (l *link) writeLoop(c FrameConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for (len(l.spans) == 0 || l.writing) && l.conn == c {
			l.work.Wait()
		}
		if l.conn != c {
			return
		}
		l.writing = true
		l.writeBatchLocked(c)
		l.writing = false
	}
}

// syncWriteMax is the most queued bytes a producer writes itself: control
// segments (SYN-ACK, ACK, FIN, RST) and DNS answers go out without a
// goroutine hand-off, while data goes to the writer goroutine, where it
// batches with whatever else is produced during a write.
const syncWriteMax = 256

// flushLocked is called by a producer after queueing: if nobody is writing,
// it writes the queue itself; otherwise the current writer, or the writer
// goroutine after it, will.
func (l *link) flushLocked() {
	if l.writing || l.conn == nil {
		l.work.Signal()
		return
	}
	l.writing = true
	l.writeBatchLocked(l.conn)
	l.writing = false
	if len(l.spans) > 0 {
		l.work.Signal()
	}
}

// writeBatchLocked swaps the queue out and writes it as one batch. l.mu is
// held on entry and exit but not during the write; the caller holds the
// writing token.
func (l *link) writeBatchLocked(c FrameConn) {
	buf, spans := l.pending, l.spans
	l.pending, l.spans = l.spare[:0], l.spareSpans[:0]
	l.held = 0
	vec := l.vec
	l.space.Broadcast()
	l.mu.Unlock()

	var err error
	if vec != nil {
		err = l.writeVecs(vec, buf, spans)
	} else {
		frames := l.frames[:0]
		for _, sp := range spans {
			// Keep buf's capacity: the stream transport finds each frame's
			// reserved header bytes by cap(buf)-cap(frame).
			f := buf[sp.start:sp.end]
			frames = append(frames, f)
			if l.tap != nil {
				l.tap(ToGuest, f)
			}
		}
		err = c.WriteFrames(buf, frames)
		clear(frames)
		l.frames = frames[:0]
	}
	l.stats.FramesOut.Add(uint64(len(spans)))
	if err != nil {
		// The guest connection is broken; Serve notices on its read side.
		// Keep draining so producers never block on a dead guest.
		l.stats.WriteErrors.Add(1)
	}
	for i := range spans {
		if spans[i].pkt != nil {
			spans[i].pkt.DecRef()
		}
	}
	clear(spans)

	l.mu.Lock()
	l.spare, l.spareSpans = buf[:0], spans[:0]
}

// writeVecs writes a batch whose large packets are still gVisor's.
func (l *link) writeVecs(w vecWriter, buf []byte, spans []span) error {
	vecs, parts := l.vecs[:0], l.parts[:0]
	for _, sp := range spans {
		fv := frameVec{head: buf[sp.start-l.over : sp.start]}
		first := len(parts)
		if sp.pkt == nil {
			parts = append(parts, buf[sp.start:sp.end])
			fv.n = sp.end - sp.start
		} else {
			parts = appendViews(parts, sp.pkt)
			fv.n = sp.pkt.Size()
		}
		fv.parts = parts[first:len(parts):len(parts)]
		vecs = append(vecs, fv)
		if l.tap != nil {
			l.tapBuf = l.tapBuf[:0]
			for _, p := range fv.parts {
				l.tapBuf = append(l.tapBuf, p...)
			}
			l.tap(ToGuest, l.tapBuf)
		}
	}
	err := w.WriteFrameVecs(vecs)
	clear(parts)
	clear(vecs)
	l.vecs, l.parts = vecs[:0], parts[:0]
	return err
}

// appendViews appends the bytes of pkt, headers and payload, in pieces.
func appendViews(parts [][]byte, pkt *stack.PacketBuffer) [][]byte {
	for b := range packetBytes(pkt) {
		parts = append(parts, b)
	}
	return parts
}

// packetBytes yields the bytes of pkt, headers and payload, in the pieces
// gVisor holds them in (no copy).
func packetBytes(pkt *stack.PacketBuffer) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		vl, off := pkt.AsViewList()
		for v := vl.Front(); v != nil; v = v.Next() {
			b := v.AsSlice()
			if off >= len(b) {
				off -= len(b)
				continue
			}
			if !yield(b[off:]) {
				return
			}
			off = 0
		}
	}
}

// releaseLocked empties the queue, letting go of the packets it holds.
func (l *link) releaseLocked() {
	for i := range l.spans {
		if l.spans[i].pkt != nil {
			l.spans[i].pkt.DecRef()
		}
	}
	clear(l.spans)
	l.pending, l.spans, l.held = l.pending[:0], l.spans[:0], 0
}

// enqueueLocked waits for room, then reserves framing and n frame bytes at
// the end of the queue and returns them. l.mu must be held and l.conn set.
func (l *link) enqueueLocked(n int) []byte {
	c := l.conn
	for len(l.pending)+l.held > maxPending && l.conn == c {
		l.work.Signal() // the queue may be full of this producer's own frames
		l.space.Wait()
	}
	if l.conn != c {
		return nil
	}
	start := len(l.pending) + l.over
	end := start + n
	if cap(l.pending) < end {
		grown := make([]byte, len(l.pending), 2*end)
		copy(grown, l.pending)
		l.pending = grown
	}
	l.pending = l.pending[:end]
	l.spans = append(l.spans, span{start: start, end: end})
	return l.pending[start:end]
}

// deliver hands one inbound Ethernet frame, already checked by the guard, to
// gVisor. The frame is copied once, into gVisor's pooled buffers.
func (l *link) deliver(frame []byte) {
	l.dmu.RLock()
	d := l.dispatcher
	l.dmu.RUnlock()
	if d == nil {
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: frameBuffer(frame)})
	hdr, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	if !ok {
		pkt.DecRef()
		return
	}
	proto := header.Ethernet(hdr).Type()
	pkt.NetworkProtocolNumber = proto
	d.DeliverNetworkPacket(proto, pkt)
	pkt.DecRef()
}

// splitMin is the payload size above which a TCP frame's headers and payload
// go into separate gVisor chunks. gVisor clones a shared chunk whenever it
// pulls headers up from it, and its TCP layer shares every segment's chunk:
// with the headers alone in theirs, that clone copies ~100 bytes instead of
// the whole payload.
const splitMin = 512

// frameBuffer copies frame into gVisor's pooled buffers.
func frameBuffer(frame []byte) buffer.Buffer {
	if h := tcpHeadersLen(frame); h > 0 && len(frame)-h >= splitMin {
		var b buffer.Buffer
		b.Append(buffer.NewViewWithData(frame[:h]))
		b.Append(buffer.NewViewWithData(frame[h:]))
		return b
	}
	return buffer.MakeWithData(frame)
}

// tcpHeadersLen is the length of the Ethernet, IPv4 and TCP headers of an
// IPv4 TCP frame, or 0 for any other frame.
func tcpHeadersLen(frame []byte) int {
	if !isIPv4TCP(frame) {
		return 0
	}
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	ihl := int(ip.HeaderLength())
	if ip.FragmentOffset() != 0 || len(ip) < ihl+header.TCPMinimumSize {
		return 0
	}
	off := int(header.TCP(ip[ihl:]).DataOffset())
	if off < header.TCPMinimumSize || len(ip) < ihl+off {
		return 0
	}
	return header.EthernetMinimumSize + ihl + off
}

// writeFrame queues one frame built outside gVisor: DHCP and DNS answers,
// and QUIC flows' datagrams to the guest.
func (l *link) writeFrame(frame []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return net.ErrClosed
	}
	dst := l.enqueueLocked(len(frame))
	if dst == nil {
		return net.ErrClosed
	}
	copy(dst, frame)
	l.kickLocked()
	return nil
}

// kickLocked has queued frames written: a small queue (control segments, a
// DNS answer) by the producer itself, without a goroutine hand-off; data
// by the writer goroutine, where it batches with whatever else is produced
// during a write. QUIC datagrams were written one syscall each while every
// writeFrame flushed itself: an HTTP/3 download through the MITM spent
// 2.1 s of capsem-net's CPU per GiB on it, against ~0.3 s for TCP's
// batched frames.
func (l *link) kickLocked() {
	if len(l.pending) <= syncWriteMax {
		l.flushLocked()
	} else {
		l.work.Signal()
	}
}

// WritePackets implements stack.LinkWriter: the packets are copied into the
// queue for the writer goroutine, or held there by reference when large
// and the transport writes frames in pieces.
func (l *link) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, pkt := range pkts.AsSlice() {
		if l.conn == nil {
			break
		}
		if size := pkt.Size(); l.vec != nil && size >= zeroCopyMin {
			// Held, not copied: gVisor's buffers are written as they are
			// (writeVecs), and the packet released after.
			if l.enqueueLocked(0) == nil {
				break
			}
			pkt.IncRef()
			l.spans[len(l.spans)-1].pkt = pkt
			l.held += size
			n++
			continue
		}
		dst := l.enqueueLocked(pkt.Size())
		if dst == nil {
			break
		}
		for b := range packetBytes(pkt) {
			dst = dst[copy(dst, b):]
		}
		n++
	}
	if n > 0 {
		l.kickLocked()
	}
	if n < pkts.Len() {
		return n, &tcpip.ErrClosedForSend{}
	}
	return n, nil
}

func (l *link) MTU() uint32                             { return l.mtu.Load() }
func (l *link) SetMTU(mtu uint32)                       { l.mtu.Store(mtu) }
func (l *link) MaxHeaderLength() uint16                 { return header.EthernetMinimumSize }
func (l *link) LinkAddress() tcpip.LinkAddress          { return l.mac }
func (l *link) SetLinkAddress(tcpip.LinkAddress)        {}
func (l *link) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }
func (l *link) Wait()                                   {}
func (l *link) Close()                                  {}
func (l *link) SetOnCloseAction(func())                 {}

// Capabilities: ARP resolution, and transport checksums received from the
// guest are trusted, as Linux trusts a virtio guest's (DATA_VALID) and passt
// does: a checksum guards a wire against corruption, and this link is a
// socket. A guest can send any bytes it likes with a valid checksum anyway,
// so verifying buys no security, only a pass over every payload. IPv4
// header checksums are still checked, in the guard.
func (l *link) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityResolutionRequired | stack.CapabilityRXChecksumOffload
}

func (l *link) Attach(d stack.NetworkDispatcher) {
	l.dmu.Lock()
	l.dispatcher = d
	l.dmu.Unlock()
}

func (l *link) IsAttached() bool {
	l.dmu.RLock()
	defer l.dmu.RUnlock()
	return l.dispatcher != nil
}

func (l *link) AddHeader(pkt *stack.PacketBuffer) {
	eth := header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize))
	eth.Encode(&header.EthernetFields{
		SrcAddr: pkt.EgressRoute.LocalLinkAddress,
		DstAddr: pkt.EgressRoute.RemoteLinkAddress,
		Type:    pkt.NetworkProtocolNumber,
	})
}

func (l *link) ParseHeader(pkt *stack.PacketBuffer) bool {
	_, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	return ok
}

// GSOMaxSize and SupportedGSO make the link a gVisor-GSO endpoint: TCP
// keeps and acknowledges what it sends to the guest in segments of up to
// 64 KiB and cuts them into MSS-sized packets only as they are written
// (tcp.sendTCPBatch), so its sender does its per-segment work once per
// 64 KiB rather than per 1,448 bytes at MTU 1500.
func (l *link) GSOMaxSize() uint32 { return stack.GVisorGSOMaxSize }

func (l *link) SupportedGSO() stack.SupportedGSO { return stack.GVisorGSOSupported }
