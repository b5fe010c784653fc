package mitm

import (
	"net"
	"sync"
	"sync/atomic"
)

// guestConn is the guest side of an intercepted flow under TLS: it replays
// the ClientHello already read, counts bytes, and tells when the HTTP
// server (or a hijacker) is done with it.
type guestConn struct {
	net.Conn
	replay        []byte
	flow          *flowState
	read, written atomic.Int64
	closeOnce     sync.Once
	closed        chan struct{}
}

func (c *guestConn) Read(b []byte) (int, error) {
	if len(c.replay) > 0 {
		n := copy(b, c.replay)
		c.replay = c.replay[n:]
		c.read.Add(int64(n))
		return n, nil
	}
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c *guestConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

func (c *guestConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { close(c.closed) })
	return err
}

// connListener hands intercepted connections to the shared HTTP server.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{} }
