package vz

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// Timings of the control connection; tests shorten them.
var (
	// dialRetry is the pause after a refused connect (the agent is not
	// listening yet) before the next one.
	dialRetry = 100 * time.Millisecond
	// dialStall is how long one connect may hang before another is tried
	// beside it.
	dialStall = 5 * time.Second
	// exitDrain is how long reads may still drain what the guest wrote
	// after the VM has exited, should the framework leave the connection
	// open.
	exitDrain = 2 * time.Second
)

// controlConn is the host end of the control channel. Under vz the guest
// agent listens on vsock and the host connects, so the channel exists only
// once the agent is up; controlConn hides that: it is valid from Start,
// connects in the background (retrying while the guest boots, until the VM
// exits or it is closed), and its Read and Write block until then, like
// the qemu backend's socketpair before the guest speaks. It reads the
// guest's first bytes itself, so the boot timer stops when the guest
// speaks even if nobody reads yet; Read returns them first.
type controlConn struct {
	dial func() (net.Conn, error)
	seen func() // called once the guest's first byte has arrived
	log  *slog.Logger

	connected chan struct{} // closed when conn is set or connErr says why not
	first     chan struct{} // closed when the first read is done (or there is no conn)
	closed    chan struct{} // closed by Close
	exited    chan struct{} // closed by vmExited
	closeOnce sync.Once
	exitOnce  sync.Once

	mu       sync.Mutex
	conn     net.Conn
	connErr  error // set before connected is closed when conn is nil
	isClosed bool

	rmu      sync.Mutex
	pending  []byte // the first read's bytes not yet returned by Read
	firstErr error  // the first read's error, returned once pending is empty
}

var _ io.ReadWriteCloser = (*controlConn)(nil)

// errVMExited is the error of a Write when the VM exited before the guest
// agent accepted the control connection.
var errVMExited = errors.New("vz: the VM exited before the guest agent accepted the control connection on vsock")

func newControlConn(dial func() (net.Conn, error), seen func(), log *slog.Logger) *controlConn {
	return &controlConn{
		dial:      dial,
		seen:      seen,
		log:       log,
		connected: make(chan struct{}),
		first:     make(chan struct{}),
		closed:    make(chan struct{}),
		exited:    make(chan struct{}),
	}
}

type dialResult struct {
	conn net.Conn
	err  error
}

// run connects, then does the first read. It returns when both are done,
// or when the VM exits or the conn is closed first.
func (c *controlConn) run() {
	conn := c.connect()
	if conn == nil {
		close(c.first)
		return
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	err = drained(err)
	c.rmu.Lock()
	c.pending, c.firstErr = buf[:n], err
	c.rmu.Unlock()
	if n > 0 {
		c.seen()
	}
	close(c.first)
}

// connect dials until a connection is made, the VM exits or c is closed.
// Dials that hang do not block the next one; a late success after another
// one won is closed.
func (c *controlConn) connect() net.Conn {
	results := make(chan dialResult)
	finished := make(chan struct{})
	defer close(finished)
	dial := func() {
		go func() {
			conn, err := c.dial()
			select {
			case results <- dialResult{conn, err}:
			case <-finished:
				if conn != nil {
					conn.Close()
				}
			}
		}()
	}
	dial()
	outstanding := 1
	timer := time.NewTimer(dialStall)
	defer timer.Stop()
	var attempts int
	for {
		select {
		case r := <-results:
			outstanding--
			attempts++
			if r.err == nil && r.conn != nil {
				c.log.Debug("vz: control channel connected", "attempts", attempts)
				return c.setConn(r.conn)
			}
			if attempts == 1 {
				c.log.Debug("vz: guest agent not listening yet; retrying", "err", r.err)
			}
			if outstanding == 0 {
				timer.Reset(dialRetry)
			}
		case <-timer.C:
			dial()
			outstanding++
			timer.Reset(dialStall)
		case <-c.exited:
			c.fail(errVMExited)
			return nil
		case <-c.closed:
			c.fail(net.ErrClosed)
			return nil
		}
	}
}

func (c *controlConn) setConn(conn net.Conn) net.Conn {
	c.mu.Lock()
	if c.isClosed {
		c.mu.Unlock()
		conn.Close()
		c.fail(net.ErrClosed)
		return nil
	}
	c.conn = conn
	c.mu.Unlock()
	close(c.connected)
	select {
	case <-c.exited:
		_ = conn.SetReadDeadline(time.Now().Add(exitDrain))
	default:
	}
	return conn
}

func (c *controlConn) fail(err error) {
	c.mu.Lock()
	c.connErr = err
	c.mu.Unlock()
	close(c.connected)
}

// Read blocks until the guest has connected and spoken, then returns its
// bytes. After the VM has exited without a connection it returns io.EOF.
func (c *controlConn) Read(p []byte) (int, error) {
	select {
	case <-c.first:
	case <-c.closed:
		return 0, net.ErrClosed
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if c.firstErr != nil {
		return 0, c.firstErr
	}
	c.mu.Lock()
	conn, connErr := c.conn, c.connErr
	c.mu.Unlock()
	if conn == nil {
		if errors.Is(connErr, net.ErrClosed) {
			return 0, net.ErrClosed
		}
		return 0, io.EOF
	}
	n, err := conn.Read(p)
	return n, drained(err)
}

// drained turns the end of the drain deadline (the only read deadline
// ever set on the connection, when the VM exited) into io.EOF.
func drained(err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return io.EOF
	}
	return err
}

// Write blocks until the guest has accepted the connection.
func (c *controlConn) Write(p []byte) (int, error) {
	select {
	case <-c.connected:
	case <-c.closed:
		return 0, net.ErrClosed
	}
	c.mu.Lock()
	conn, err := c.conn, c.connErr
	c.mu.Unlock()
	if conn == nil {
		return 0, err
	}
	return conn.Write(p)
}

// Close closes the connection, or stops trying to make it.
func (c *controlConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.isClosed = true
		conn := c.conn
		c.mu.Unlock()
		close(c.closed)
		if conn != nil {
			conn.Close()
		}
	})
	return nil
}

// vmExited stops the dialling and bounds how long reads wait for more.
func (c *controlConn) vmExited() {
	c.exitOnce.Do(func() {
		close(c.exited)
		c.mu.Lock()
		conn := c.conn
		c.mu.Unlock()
		if conn != nil {
			_ = conn.SetReadDeadline(time.Now().Add(exitDrain))
		}
	})
}
