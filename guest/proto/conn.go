package proto

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// ErrHandshake wraps every failure of the Hello exchange.
var ErrHandshake = errors.New("proto: handshake failed")

// Conn sends and receives messages over a byte stream (a virtio-serial
// port, a vsock connection, a socketpair, net.Pipe). Send is safe for
// concurrent use and writes each frame with one Write call; Recv must be
// called from one goroutine.
type Conn struct {
	rw io.ReadWriter
	r  *Reader

	wmu  sync.Mutex
	wbuf []byte
	werr error
}

// NewConn returns a Conn over rw.
func NewConn(rw io.ReadWriter) *Conn {
	return &Conn{rw: rw, r: NewReader(rw)}
}

// Send encodes m and writes it. After a write error every later Send
// returns that error: the stream cannot be trusted to be at a frame
// boundary any more.
func (c *Conn) Send(m Message) error {
	f, err := Encode(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	c.wbuf, err = AppendFrame(c.wbuf[:0], f)
	if err != nil {
		return err
	}
	if _, err := c.rw.Write(c.wbuf); err != nil {
		c.werr = fmt.Errorf("proto: send %v: %w", f.Type, err)
		return c.werr
	}
	if cap(c.wbuf) > 4*MaxData+HeaderLen {
		c.wbuf = nil // do not keep a large frame's buffer for ever
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

// Close closes the underlying stream if it is an io.Closer.
func (c *Conn) Close() error {
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
		if h.Proto != Version {
			err := fmt.Errorf("%w: the %s speaks protocol version %d, this side %d: use a %s built from the same capsem release",
				ErrHandshake, who, h.Proto, Version, who)
			_ = c.Send(Error{Msg: err.Error()})
			return Hello{}, err
		}
		if h.Window > MaxWindow {
			return Hello{}, fmt.Errorf("%w: the %s's window %d exceeds %d", ErrHandshake, who, h.Window, MaxWindow)
		}
		return h, nil
	case Error:
		return Hello{}, fmt.Errorf("%w: the %s refused: %s", ErrHandshake, who, h.Msg)
	default:
		return Hello{}, fmt.Errorf("%w: the %s sent %v before hello", ErrHandshake, who, m.Type())
	}
}
