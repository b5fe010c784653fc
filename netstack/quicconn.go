package netstack

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// maxQueuedDatagramBytes bounds the guest datagrams a QUIC flow holds that
// its handler has not read yet: 256 KiB, about a Linux socket's default
// receive buffer (rmem_default, 208 KiB), which is what a QUIC server
// reading a real UDP socket gets. The handler reads in a loop, so the
// queue is near empty unless it stalls; at MaxFlows flows all stalled it
// bounds what the guest can park on the host to MaxFlows × 256 KiB.
const maxQueuedDatagramBytes = 256 << 10

// maxQueuedDatagrams bounds the number of queued datagrams as well, so
// that tiny datagrams do not cost a slot each beyond it.
const maxQueuedDatagrams = 512

// udpFlowConn is the net.PacketConn a DatagramFlowHandler gets: the
// guest's datagrams of one flow in, UDP datagrams to the guest out, from
// the address and port the guest sent them to.
//
// When its queue is full a new datagram is dropped (drop-new, counted in
// Stats.QUICQueueDrops), not the oldest: that is what a kernel socket
// buffer does, QUIC's loss recovery resends what was dropped, and it
// keeps the first Initials, whose ClientHello the handler needs first.
type udpFlowConn struct {
	s         *Stack
	local     netip.AddrPort // the flow's destination: where replies come from
	guest     netip.AddrPort
	guestAddr *net.UDPAddr // guest, as ReadFrom returns it (made once, not per datagram)

	in       chan []byte
	queued   atomic.Int64 // bytes in in
	lastUsed atomic.Int64 // unix nanoseconds of the last datagram either way

	sent, received atomic.Int64 // payload bytes guest to capsem, capsem to guest

	rd, wd    deadline
	done      chan struct{}
	closeOnce sync.Once
}

func newUDPFlowConn(s *Stack, local, guest netip.AddrPort) *udpFlowConn {
	c := &udpFlowConn{s: s, local: local, guest: guest, guestAddr: net.UDPAddrFromAddrPort(guest),
		in: make(chan []byte, maxQueuedDatagrams), done: make(chan struct{})}
	c.rd.init()
	c.wd.init()
	c.touch()
	return c
}

func (c *udpFlowConn) touch() { c.lastUsed.Store(time.Now().UnixNano()) }

// push queues a copy of a guest datagram for the handler. It never blocks:
// it is called by the goroutine that reads every guest frame.
func (c *udpFlowConn) push(p []byte) {
	select {
	case <-c.done:
		return
	default:
	}
	if c.queued.Load()+int64(len(p)) > maxQueuedDatagramBytes {
		c.s.stats.QUICQueueDrops.Add(1)
		return
	}
	select {
	case c.in <- append([]byte(nil), p...):
		c.queued.Add(int64(len(p)))
		c.sent.Add(int64(len(p)))
		c.touch()
	default:
		c.s.stats.QUICQueueDrops.Add(1)
	}
}

// ReadFrom returns the guest's next datagram of this flow, in the order
// the guest sent them; a datagram longer than p is cut to p, like a UDP
// socket does. addr is the guest's address and port.
func (c *udpFlowConn) ReadFrom(p []byte) (int, net.Addr, error) {
	select {
	case <-c.done:
		return 0, nil, c.opErr("read", net.ErrClosed)
	case <-c.rd.wait():
		return 0, nil, c.opErr("read", os.ErrDeadlineExceeded)
	default:
	}
	select {
	case d := <-c.in:
		c.queued.Add(-int64(len(d)))
		return copy(p, d), c.guestAddr, nil
	case <-c.done:
		return 0, nil, c.opErr("read", net.ErrClosed)
	case <-c.rd.wait():
		return 0, nil, c.opErr("read", os.ErrDeadlineExceeded)
	}
}

// frameBufs hold the frames WriteTo builds; writeFrame copies them out.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// WriteTo sends p to the guest as one UDP datagram from the flow's
// destination address and port. addr must be the guest's (ReadFrom's
// addr). A datagram that does not fit the guest's MTU is dropped without
// an error and counted (Stats.QUICWritesTooBig), as a router drops a
// datagram it may not fragment: QUIC's path MTU discovery probes with
// such datagrams and takes their loss as the answer, while a write error
// would end its connection.
func (c *udpFlowConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	select {
	case <-c.done:
		return 0, c.opErr("write", net.ErrClosed)
	case <-c.wd.wait():
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	default:
	}
	if ua, ok := addr.(*net.UDPAddr); !ok || netip.AddrPortFrom(ua.AddrPort().Addr().Unmap(), ua.AddrPort().Port()) != c.guest {
		return 0, c.opErr("write", &net.AddrError{Err: "a QUIC flow's datagrams go to its guest " + c.guest.String() + " only", Addr: addrString(addr)})
	}
	if len(p) > int(c.s.link.MTU())-header.IPv4MinimumSize-header.UDPMinimumSize {
		c.s.stats.QUICWritesTooBig.Add(1)
		return len(p), nil
	}
	bp := frameBufs.Get().(*[]byte)
	defer frameBufs.Put(bp)
	*bp = appendUDPFrame((*bp)[:0], c.s.guestLink(), c.s.link.mac,
		tcpip.AddrFrom4(c.local.Addr().As4()), tcpip.AddrFrom4(c.guest.Addr().As4()), c.local.Port(), c.guest.Port(), p)
	if err := c.s.link.writeFrame(*bp); err != nil {
		return 0, c.opErr("write", err)
	}
	c.received.Add(int64(len(p)))
	c.touch()
	return len(p), nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return "<nil>"
	}
	return a.String()
}

func (c *udpFlowConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Close ends the flow's datagrams both ways: reads and writes fail with
// net.ErrClosed, and guest datagrams of the flow are dropped until the
// handler returns.
func (c *udpFlowConn) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	return nil
}

// LocalAddr is the flow's destination, the address and port the guest
// sent to (a fake-DNS address, port 443).
func (c *udpFlowConn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.local) }

// RemoteAddr is the guest's address and source port.
func (c *udpFlowConn) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(c.guest) }

func (c *udpFlowConn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *udpFlowConn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *udpFlowConn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a read or write deadline: wait's channel is closed once it
// passes (net.Pipe's pipeDeadline, which is unexported).
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func (d *deadline) init() { d.cancel = make(chan struct{}) }

// set moves the deadline to t; the zero time means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait for it to close cancel
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// wait returns a channel closed once the deadline has passed.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

var _ net.PacketConn = (*udpFlowConn)(nil)
