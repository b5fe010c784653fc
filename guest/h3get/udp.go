package h3get

import (
	"net"
	"time"
)

// connectedUDP is a connected UDP socket as the net.PacketConn quic-go
// takes. It hides *net.UDPConn's ReadMsgUDP/WriteMsgUDP on purpose: quic-go
// would use them with a destination address, which a connected socket
// refuses.
type connectedUDP struct{ c *net.UDPConn }

func dialUDP(raddr *net.UDPAddr) (connectedUDP, error) {
	c, err := net.DialUDP("udp4", nil, raddr)
	return connectedUDP{c}, err
}

func (u connectedUDP) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := u.c.Read(b)
	return n, u.c.RemoteAddr(), err
}
func (u connectedUDP) WriteTo(b []byte, _ net.Addr) (int, error) { return u.c.Write(b) }
func (u connectedUDP) Close() error                              { return u.c.Close() }
func (u connectedUDP) LocalAddr() net.Addr                       { return u.c.LocalAddr() }
func (u connectedUDP) SetDeadline(t time.Time) error             { return u.c.SetDeadline(t) }
func (u connectedUDP) SetReadDeadline(t time.Time) error         { return u.c.SetReadDeadline(t) }
func (u connectedUDP) SetWriteDeadline(t time.Time) error        { return u.c.SetWriteDeadline(t) }

// SetReadBuffer and SetWriteBuffer let quic-go size the socket's buffers,
// as it does a *net.UDPConn's.
func (u connectedUDP) SetReadBuffer(n int) error  { return u.c.SetReadBuffer(n) }
func (u connectedUDP) SetWriteBuffer(n int) error { return u.c.SetWriteBuffer(n) }
