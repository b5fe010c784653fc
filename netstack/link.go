package netstack

import (
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

// link is capsem's gVisor link endpoint. It is written for this job rather
// than taken from gvisor-tap-vsock: writes are batched into one buffer and one
// syscall per WritePackets call, the buffer is reused (no allocation per
// frame), and inbound frames pass the guard in guard.go before gVisor sees
// them.
type link struct {
	mtu atomic.Uint32
	mac tcpip.LinkAddress

	dmu        sync.RWMutex
	dispatcher stack.NetworkDispatcher

	wmu    sync.Mutex
	conn   FrameConn
	wbuf   []byte
	frames [][]byte
	tap    FrameTap

	stats *Stats
}

var _ stack.LinkEndpoint = (*link)(nil)

func newLink(mtu uint32, mac tcpip.LinkAddress, stats *Stats) *link {
	l := &link{mac: mac, stats: stats}
	l.mtu.Store(mtu)
	return l
}

// setConn points the link at a guest connection (nil detaches it).
func (l *link) setConn(c FrameConn) {
	l.wmu.Lock()
	l.conn = c
	l.wmu.Unlock()
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
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
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

// writeFrame sends one frame built outside gVisor (DHCP and DNS answers).
func (l *link) writeFrame(frame []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.conn == nil {
		return nil
	}
	over := l.conn.FramingOverhead()
	l.wbuf = append(l.wbuf[:0], make([]byte, over)...)
	l.wbuf = append(l.wbuf, frame...)
	l.frames = append(l.frames[:0], l.wbuf[over:])
	return l.flushLocked()
}

func (l *link) flushLocked() error {
	for _, f := range l.frames {
		if l.tap != nil {
			l.tap(ToGuest, f)
		}
	}
	l.stats.FramesOut.Add(uint64(len(l.frames)))
	return l.conn.WriteFrames(l.wbuf, l.frames)
}

// WritePackets implements stack.LinkWriter: every packet of the batch is
// copied into one reused buffer and written with a single call.
func (l *link) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.conn == nil {
		return 0, &tcpip.ErrClosedForSend{}
	}
	over := l.conn.FramingOverhead()
	total := 0
	for _, pkt := range pkts.AsSlice() {
		total += over + pkt.Size()
	}
	if cap(l.wbuf) < total {
		l.wbuf = make([]byte, 0, total+total/2)
	}
	buf := l.wbuf[:0]
	l.frames = l.frames[:0]
	for _, pkt := range pkts.AsSlice() {
		buf = buf[:len(buf)+over]
		start := len(buf)
		vl, off := pkt.AsViewList()
		for v := vl.Front(); v != nil; v = v.Next() {
			b := v.AsSlice()
			if off >= len(b) {
				off -= len(b)
				continue
			}
			buf = append(buf, b[off:]...)
			off = 0
		}
		// The frame keeps buf's capacity: the stream transport finds the
		// reserved header bytes before it by cap(buf)-cap(frame).
		l.frames = append(l.frames, buf[start:])
	}
	l.wbuf = buf
	if err := l.flushLocked(); err != nil {
		l.stats.WriteErrors.Add(1)
		return 0, &tcpip.ErrClosedForSend{}
	}
	return pkts.Len(), nil
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

func (l *link) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityResolutionRequired
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
