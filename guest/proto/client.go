package proto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Client is the host's end of the control channel: it runs commands in the
// guest and receives the agent's events. Create one with NewClient over the
// stream connected to the agent.
//
// The guest is not trusted: everything it sends is bounded (frame size,
// windows) and a peer that overruns a window ends the connection.
type Client struct {
	conn  *Conn
	agent Hello
	ready Ready
	opts  ClientOptions
	log   *slog.Logger

	mu       sync.Mutex
	sessions map[uint32]*Session
	lastID   uint32
	pings    map[uint64]chan struct{}
	lastPing uint64
	err      error // why the connection ended, once done is closed
	// The Freeze and the Thaw waiting for their answer, if any
	// (client_freeze.go).
	freezeWait chan Frozen
	thawWait   chan Thawed

	// pong holds the one Pong owed to the agent; Pings that arrive while
	// it is pending go unanswered (see read).
	pong chan uint64
	// Rate-limited logs of frames ignored without ending the connection.
	unanswered, unknown, agentErrs, stray, replies logLimit
	done                                           chan struct{}
}

// ClientOptions configure NewClient. All fields are optional.
type ClientOptions struct {
	Host string    // the host's version, sent in Hello
	CA   string    // a PEM CA the agent installs before Ready
	Time time.Time // the wall clock sent in Hello (default: the time it is sent)
	// OnEvent receives, from the connection's reading goroutine, the
	// messages that belong to no session: FileEvent, ExecEvent, Error with
	// ID 0, Unknown. It must not block for long: nothing else is read
	// meanwhile.
	OnEvent func(Message)
	Logger  *slog.Logger
	// WriteTimeout is how long a frame to the agent may wait for it to
	// read before the agent is cut off (ErrStalled, wrapped in
	// ErrViolation); 0 means DefaultWriteTimeout, negative none.
	WriteTimeout time.Duration
}

// DefaultWriteTimeout bounds every write to the agent. A healthy agent
// reads its port without pause (it blocks on nothing but starting a
// command), and a write blocks only once ~200 KiB are queued unread in the
// socket and the port's buffers: 5 s of that is an agent that stopped
// reading — guest root holding the port — not a slow one. Before this
// bound such a guest wedged every Send behind the blocked one: signals,
// --timeout, Ctrl-C, stop and the watchdog's pings.
const DefaultWriteTimeout = 5 * time.Second

// ErrClosed is returned for operations on a client whose connection ended.
var ErrClosed = errors.New("proto: connection to the agent closed")

// ErrViolation wraps ErrClosed's cause when the client cut the agent off
// because it broke the protocol: a malformed or oversized frame, data beyond
// a window, credit beyond MaxWindow, a message only the host sends, or no
// reading of what the host sends for the write timeout (ErrStalled). The
// guest is then not trustworthy any more; the caller stops the VM.
var ErrViolation = errors.New("proto: the agent broke the protocol and was cut off")

// ErrTooManySessions is returned by Exec when MaxSessions commands run.
var ErrTooManySessions = errors.New("proto: too many sessions")

// NewClient runs the handshake over rw (reads the agent's Hello, sends the
// host's, waits for Ready) and starts reading. ctx bounds the handshake
// only: when it is done first, rw is closed.
func NewClient(ctx context.Context, rw io.ReadWriteCloser, opts ClientOptions) (*Client, error) {
	c := newClient(rw, opts)
	if err := c.start(ctx, rw, c.handshake); err != nil {
		return nil, err
	}
	return c, nil
}

// newClient is a Client over rw that has not spoken yet.
func newClient(rw io.ReadWriteCloser, opts ClientOptions) *Client {
	timeout := opts.WriteTimeout
	if timeout == 0 {
		timeout = DefaultWriteTimeout
	}
	c := &Client{
		conn:     NewConnTimeout(rw, timeout),
		opts:     opts,
		log:      opts.Logger,
		sessions: map[uint32]*Session{},
		pings:    map[uint64]chan struct{}{},
		pong:     make(chan uint64, 1),
		done:     make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// start runs the first exchange (the handshake, or a resume's Thaw),
// bounded by ctx (rw is closed when ctx ends first), then starts reading.
func (c *Client) start(ctx context.Context, rw io.Closer, first func() error) error {
	stop := context.AfterFunc(ctx, func() { rw.Close() })
	err := first()
	if !stop() {
		c.conn.Close()
		if err == nil || ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ErrHandshake, context.Cause(ctx))
		}
		return err
	}
	if err != nil {
		c.conn.Close()
		return err
	}
	go c.readLoop()
	go c.pongLoop()
	return nil
}

func (c *Client) handshake() error {
	var t int64 // zero: HostHandshake reads the clock when it answers
	if !c.opts.Time.IsZero() {
		t = c.opts.Time.UnixNano()
	}
	agent, err := c.conn.HostHandshake(Hello{Host: c.opts.Host, Time: t, CA: c.opts.CA})
	if err != nil {
		return err
	}
	c.agent = agent
	for {
		m, err := c.conn.Recv()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%w: waiting for ready: %w", ErrHandshake, err)
		}
		switch m := m.(type) {
		case Ready:
			c.ready = m
			return nil
		case Error:
			return fmt.Errorf("%w: the agent failed before ready: %s", ErrHandshake, m.Msg)
		case FileEvent, ExecEvent, Unknown:
			c.event(m)
		default:
			return fmt.Errorf("%w: the agent sent %v before ready", ErrHandshake, m.Type())
		}
	}
}

// Hello returns the agent's Hello (versions, kernel).
func (c *Client) Hello() Hello { return c.agent }

// Ready returns the agent's boot facts.
func (c *Client) Ready() Ready { return c.ready }

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err reports why the connection ended (nil while it runs).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; running sessions fail with ErrClosed.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

// Shutdown asks the agent to power the guest off. The connection ends when
// the guest is gone.
func (c *Client) Shutdown(reason string) error {
	return c.conn.Send(Shutdown{Reason: reason})
}

// Ping measures a round trip to the agent.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	ch := make(chan struct{})
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, c.err
	}
	c.lastPing++
	seq := c.lastPing
	c.pings[seq] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pings, seq)
		c.mu.Unlock()
	}()
	start := time.Now()
	if err := c.conn.SendContext(ctx, Ping{Seq: seq}); err != nil {
		return 0, err
	}
	select {
	case <-ch:
		return time.Since(start), nil
	case <-c.done:
		return 0, c.Err()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Exec starts a command in the guest and returns once it runs (or could not
// start: the error is then an Error with the agent's message and the exit
// code a shell would give). ex.ID is assigned here. If ctx ends before the
// agent answers, the session is killed.
func (c *Client) Exec(ctx context.Context, ex Exec) (*Session, error) {
	if ex.Window == 0 {
		ex.Window = DefaultWindow
	}
	if ex.Window > MaxWindow {
		ex.Window = MaxWindow
	}
	stdinWin := c.agent.Window
	if stdinWin == 0 {
		stdinWin = DefaultWindow
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	if len(c.sessions) >= MaxSessions {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %d commands already run in the guest; wait for one to end", ErrTooManySessions, MaxSessions)
	}
	for {
		c.lastID++
		if c.lastID != 0 && c.sessions[c.lastID] == nil {
			break
		}
	}
	ex.ID = c.lastID
	s := &Session{
		c:       c,
		id:      ex.ID,
		exec:    ex,
		sent:    time.Now(), // set under c.mu, before the reader can see s
		tty:     ex.TTY,
		stdin:   NewCredit(stdinWin),
		started: make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.stdout = NewInbox(ex.Window, s.acker(StreamStdout))
	s.stderr = NewInbox(ex.Window, s.acker(StreamStderr))
	c.sessions[ex.ID] = s
	c.mu.Unlock()

	if err := c.conn.SendContext(ctx, ex); err != nil {
		c.finish(s, Exit{}, err)
		return nil, err
	}
	select {
	case <-s.started:
		if s.startErr != nil {
			return nil, s.startErr
		}
		return s, nil
	case <-ctx.Done():
		s.Cancel(context.Cause(ctx))
		return nil, context.Cause(ctx)
	}
}

func (c *Client) event(m Message) {
	if c.opts.OnEvent != nil {
		c.opts.OnEvent(m)
	}
}

func (c *Client) session(id uint32) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *Client) readLoop() {
	err := c.read()
	if err == io.EOF {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	if serr := c.conn.Stalled(); serr != nil {
		// The read ended because the watchdog closed the stream.
		err = fmt.Errorf("%w: %w: %w", ErrClosed, ErrViolation, serr)
	}
	c.conn.Close()
	c.mu.Lock()
	c.err = err
	sessions := c.sessions
	c.sessions = map[uint32]*Session{}
	c.mu.Unlock()
	for _, s := range sessions {
		c.finish(s, Exit{}, err)
	}
	close(c.done)
}

func (c *Client) read() error {
	for {
		m, err := c.conn.Recv()
		if err != nil {
			if err == io.EOF {
				return err
			}
			if errors.Is(err, ErrMalformed) || errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrFrameTooShort) {
				return fmt.Errorf("%w: %w", ErrViolation, err)
			}
			return err
		}
		switch m := m.(type) {
		// A frame of a session this client does not have (one it
		// cancelled, or one of another host's, before a restore) is
		// dropped: never an error, since a session's end and its last
		// frames cross on the wire.
		case Stdout:
			if s := c.session(m.ID); s != nil {
				if err := s.stdout.Push(m.Data); err != nil {
					return fmt.Errorf("%w: session %d stdout: %w", ErrViolation, m.ID, err)
				}
			} else {
				c.strayFrame(m, m.ID)
			}
		case Stderr:
			if s := c.session(m.ID); s != nil {
				if err := s.stderr.Push(m.Data); err != nil {
					return fmt.Errorf("%w: session %d stderr: %w", ErrViolation, m.ID, err)
				}
			} else {
				c.strayFrame(m, m.ID)
			}
		case Window:
			if s := c.session(m.ID); s != nil {
				if m.Stream == StreamStdin {
					if err := s.stdin.Add(m.N); err != nil {
						return fmt.Errorf("%w: session %d stdin: %w", ErrViolation, m.ID, err)
					}
				}
			} else {
				c.strayFrame(m, m.ID)
			}
		case Started:
			if s := c.session(m.ID); s != nil {
				s.startOnce.Do(func() {
					s.pid = m.PID
					close(s.started)
				})
			} else {
				c.strayFrame(m, m.ID)
			}
		case Exit:
			if s := c.session(m.ID); s != nil {
				c.finish(s, m, nil)
			} else {
				c.strayFrame(m, m.ID)
			}
		case Error:
			if m.ID == 0 {
				c.agentErrs.warn(c.log, "agent error", "msg", logText(m.Msg))
				c.event(m)
			} else if s := c.session(m.ID); s != nil {
				c.finish(s, Exit{}, m)
			} else {
				c.strayFrame(m, m.ID)
			}
		case Ping:
			// Answered by pongLoop, one at a time: a guest that sends
			// Pings without end and never reads costs one pending Pong,
			// not a goroutine each (it grew capsem to 3.9 GB in 22 s).
			select {
			case c.pong <- m.Seq:
			default:
				c.unanswered.warn(c.log, "ping from the agent while a pong is pending, unanswered")
			}
		case Pong:
			c.mu.Lock()
			if ch := c.pings[m.Seq]; ch != nil {
				close(ch)
				delete(c.pings, m.Seq)
			}
			c.mu.Unlock()
		case Frozen:
			c.answerFreeze(m)
		case Thawed:
			c.answerThaw(m)
		case FileEvent, ExecEvent:
			c.event(m)
		case Unknown:
			c.unknown.warn(c.log, "message of an unknown type from the agent, ignored", "type", m.Type())
			c.event(m)
		default:
			// Hello, Ready, Exec, Stdin, StdinClose, Signal, Resize,
			// Shutdown, Freeze, Thaw: only the host sends these once the
			// handshake is done.
			return fmt.Errorf("%w: the agent sent %v, which only the host sends", ErrViolation, m.Type())
		}
	}
}

// strayFrame notes a frame of session id, which this client does not have.
func (c *Client) strayFrame(m Message, id uint32) {
	c.stray.debug(c.log, "frame of a session the host does not have, ignored", "type", m.Type(), "session", id)
}

// pongLoop answers the agent's Pings, the latest pending one at a time.
func (c *Client) pongLoop() {
	for {
		select {
		case seq := <-c.pong:
			if c.conn.Send(Pong{Seq: seq}) != nil {
				return
			}
		case <-c.done:
			return
		}
	}
}

// finish ends s with exit, or with err.
func (c *Client) finish(s *Session, exit Exit, err error) {
	s.endOnce.Do(func() {
		c.mu.Lock()
		if c.sessions[s.id] == s {
			delete(c.sessions, s.id)
		}
		c.mu.Unlock()
		s.exit, s.err = exit, err
		s.ended = time.Now()
		s.stdout.CloseWrite(err)
		s.stderr.CloseWrite(err)
		s.startOnce.Do(func() {
			s.startErr = err
			close(s.started)
		})
		if err == nil {
			err = errSessionEnded
		}
		s.stdin.Close(err)
		close(s.done)
	})
}

var errSessionEnded = errors.New("proto: the session has ended")
