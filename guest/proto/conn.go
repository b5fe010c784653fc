package proto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ErrHandshake wraps every failure of the Hello exchange.
var ErrHandshake = errors.New("proto: handshake failed")

// ErrStalled means the peer stopped reading: a write to it did not finish
// within the write timeout (NewConnTimeout). The stream is closed then,
// since the peer cannot be told anything any more.
var ErrStalled = errors.New("proto: the peer stopped reading the control channel")

// Conn sends and receives messages over a byte stream (a virtio-serial
// port, a vsock connection, a socketpair, net.Pipe). Send is safe for
// concurrent use and writes each frame with one Write call; Recv must be
// called from one goroutine.
type Conn struct {
	rw io.ReadWriter
	r  *Reader

	// wsem holds the right to write (a channel, not a mutex, so that a
	// wait for it can end with a context); wbuf and werr are its.
	wsem chan struct{}
	wbuf []byte
	werr error
	// While holding (Hold to Release), Send queues each encoded frame in
	// held instead of writing it (conn_hold.go). Both change with wsem
	// held; holding is atomic so that Holding need not wait for a write.
	holding atomic.Bool
	held    [][]byte

	// The write timeout: a watchdog closes the stream when one write has
	// been under way for longer. wseq counts the starts and ends of
	// writes: odd while one is under way.
	timeout   time.Duration
	wseq      atomic.Uint64
	stallErr  error // set before stalled
	stalled   atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}
}

// NewConn returns a Conn over rw whose writes wait for the peer as long as
// it takes (the agent's side: its host is trusted to read).
func NewConn(rw io.ReadWriter) *Conn {
	return &Conn{rw: rw, r: NewReader(rw), wsem: make(chan struct{}, 1), closed: make(chan struct{})}
}

// NewConnTimeout returns a Conn over rw that gives up on a peer which does
// not take a frame within timeout: the stream is closed, that Send and
// every later one fail with ErrStalled. rw must be an io.Closer for a
// stalled write to end. Close the Conn to stop its watchdog.
func NewConnTimeout(rw io.ReadWriter, timeout time.Duration) *Conn {
	c := NewConn(rw)
	if timeout > 0 {
		c.timeout = timeout
		go c.watch()
	}
	return c
}

// watch looks at the writes a few times per timeout: when the same write
// has been under way at every look for the timeout, it closes the stream,
// which ends the blocked Write. The cost on the hot path is two atomic
// adds per frame; reading the clock, or resetting a timer, per frame cost
// more (measured: +80 to +130 ns a frame with time.Since).
func (c *Conn) watch() {
	const looks = 4
	t := time.NewTicker(c.timeout / looks)
	defer t.Stop()
	var last uint64
	seen := 0 // looks that found write last still under way
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
			w := c.wseq.Load()
			if w&1 == 0 || w != last {
				last, seen = w, 0
				continue
			}
			if seen++; seen >= looks {
				c.stallErr = fmt.Errorf("%w: a frame waited %v to be taken", ErrStalled, c.timeout)
				c.stalled.Store(true)
				_ = c.Close()
				return
			}
		}
	}
}

// Send encodes m and writes it. After a write error every later Send
// returns that error: the stream cannot be trusted to be at a frame
// boundary any more.
func (c *Conn) Send(m Message) error {
	return c.SendContext(context.Background(), m)
}

// SendContext is Send whose wait for another Send's write to finish ends
// with ctx. The write itself is bounded by the write timeout, not by ctx:
// a frame is written whole or the stream is given up.
func (c *Conn) SendContext(ctx context.Context, m Message) error {
	f, err := Encode(m)
	if err != nil {
		return err
	}
	if err := c.lock(ctx, f.Type); err != nil {
		return err
	}
	defer c.unlock()
	if c.werr != nil {
		return c.werr
	}
	if c.holding.Load() {
		// A copy: a data message's body is the caller's buffer, which it
		// reuses once Send returns.
		b, err := AppendFrame(nil, f)
		if err != nil {
			return err
		}
		c.held = append(c.held, b)
		return nil
	}
	c.wbuf, err = AppendFrame(c.wbuf[:0], f)
	if err != nil {
		return err
	}
	err = c.writeLocked(c.wbuf, f.Type)
	if cap(c.wbuf) > 4*MaxData+HeaderLen {
		c.wbuf = nil // do not keep a large frame's buffer for ever
	}
	return err
}

// lock takes the right to write (wsem), or gives up when ctx ends first;
// t names the frame in the error.
func (c *Conn) lock(ctx context.Context, t Type) error {
	if done := ctx.Done(); done == nil {
		c.wsem <- struct{}{}
	} else {
		select {
		case c.wsem <- struct{}{}:
		case <-done:
			return fmt.Errorf("proto: send %v: %w", t, context.Cause(ctx))
		}
	}
	return nil
}

func (c *Conn) unlock() { <-c.wsem }

// writeLocked writes one encoded frame of type t, with wsem held, under
// the write timeout. A failed write is remembered in werr: the stream is
// no longer known to be at a frame boundary.
func (c *Conn) writeLocked(b []byte, t Type) error {
	c.wseq.Add(1)
	_, err := c.rw.Write(b)
	c.wseq.Add(1)
	if err != nil {
		if serr := c.Stalled(); serr != nil {
			err = serr
		}
		c.werr = fmt.Errorf("proto: send %v: %w", t, err)
		return c.werr
	}
	return nil
}

// Stalled returns the error wrapping ErrStalled once the write timeout
// has cut the peer off, nil before.
func (c *Conn) Stalled() error {
	if c.stalled.Load() {
		return c.stallErr
	}
	return nil
}

// Recv reads and decodes the next message. A frame of an unknown type gives
// Unknown. An error wrapping ErrMalformed concerns one frame's body: the
// stream is still in step and the caller may go on reading. Any other error
// (io.EOF when the peer closed cleanly) ends the stream.
func (c *Conn) Recv() (Message, error) {
	f, err := c.r.ReadFrame()
	if err != nil {
		return nil, err
	}
	return Decode(f)
}

// Close closes the underlying stream if it is an io.Closer, and stops the
// write watchdog.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	if cl, ok := c.rw.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// AgentHandshake is the agent's half of the Hello exchange: it sends mine,
// then reads and checks the host's Hello, which it returns.
func (c *Conn) AgentHandshake(mine Hello) (Hello, error) {
	mine.Proto = Version
	if err := c.Send(mine); err != nil {
		return Hello{}, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return c.readHello("host")
}

// HostHandshake is the host's half: it reads and checks the agent's Hello,
// then sends mine. It returns the agent's Hello.
func (c *Conn) HostHandshake(mine Hello) (Hello, error) {
	peer, err := c.readHello("agent")
	if err != nil {
		return Hello{}, err
	}
	mine.Proto = Version
	if mine.Time == 0 {
		// The clock the guest may set itself from: read now, after the
		// wait for the agent's hello (a boot), not before it.
		mine.Time = time.Now().UnixNano()
	}
	if err := c.Send(mine); err != nil {
		return Hello{}, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return peer, nil
}

// checkHello refuses a peer's Hello this side cannot speak to: another
// protocol version, a window over MaxWindow. who names the peer.
func checkHello(h Hello, who string) error {
	if h.Proto != Version {
		return fmt.Errorf("%w: the %s speaks protocol version %d, this side %d: use a %s built from the same capsem release",
			ErrHandshake, who, h.Proto, Version, who)
	}
	if h.Window > MaxWindow {
		return fmt.Errorf("%w: the %s's window %d exceeds %d", ErrHandshake, who, h.Window, MaxWindow)
	}
	return nil
}

func (c *Conn) readHello(who string) (Hello, error) {
	m, err := c.Recv()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Hello{}, fmt.Errorf("%w: reading the %s's hello: %w", ErrHandshake, who, err)
	}
	switch h := m.(type) {
	case Hello:
		if err := checkHello(h, who); err != nil {
			if h.Proto != Version {
				_ = c.Send(Error{Msg: err.Error()})
			}
			return Hello{}, err
		}
		return h, nil
	case Error:
		return Hello{}, fmt.Errorf("%w: the %s refused: %s", ErrHandshake, who, h.Msg)
	default:
		return Hello{}, fmt.Errorf("%w: the %s sent %v before hello", ErrHandshake, who, m.Type())
	}
}
