package proto

import (
	"io"
	"sync"
	"time"
)

// Session is one command running in the guest.
type Session struct {
	c      *Client
	id     uint32
	exec   Exec
	sent   time.Time // when the host sent Exec
	ended  time.Time // when the host saw the session end; set before done is closed
	tty    bool
	pid    int
	stdout *Inbox
	stderr *Inbox
	stdin  *Credit
	wmu    sync.Mutex

	startOnce sync.Once
	started   chan struct{}
	startErr  error // set before started is closed, if the session failed to start
	endOnce   sync.Once
	done      chan struct{}
	exit      Exit
	err       error
}

func (s *Session) acker(stream uint8) func(uint32) {
	return func(n uint32) {
		_ = s.c.conn.Send(Window{ID: s.id, Stream: stream, N: n})
	}
}

// ID returns the session id.
func (s *Session) ID() uint32 { return s.id }

// Exec returns the Exec the host sent for this session: what the host
// asked for, not what the guest says it ran.
func (s *Session) Exec() Exec { return s.exec }

// Times returns when the host sent the session's Exec and when it saw the
// session end (zero until Done is closed), both by the host's clock.
func (s *Session) Times() (sent, ended time.Time) {
	select {
	case <-s.done:
		return s.sent, s.ended
	default:
		return s.sent, time.Time{}
	}
}

// PID returns the command's process id in the guest.
func (s *Session) PID() int { return s.pid }

// Stdout returns the command's output (everything, on a pty). Read it
// concurrently with Stderr: a command blocked on a full stderr window
// produces no more stdout.
func (s *Session) Stdout() io.Reader { return s.stdout }

// Stderr returns the command's error output (empty on a pty).
func (s *Session) Stderr() io.Reader { return s.stderr }

// Write sends p to the command's stdin, waiting for credit as needed.
func (s *Session) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	written := 0
	for written < len(p) {
		n, err := s.stdin.Take(min(len(p)-written, MaxData))
		if err != nil {
			return written, err
		}
		if err := s.c.conn.Send(Stdin{ID: s.id, Data: p[written : written+n]}); err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// CloseStdin ends the command's input.
func (s *Session) CloseStdin() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.c.conn.Send(StdinClose{ID: s.id})
}

// Signal sends a signal by name ("INT", "TERM", "KILL", …).
func (s *Session) Signal(sig string) error {
	return s.c.conn.Send(Signal{ID: s.id, Sig: sig})
}

// Cancel ends the session on the host's side at once, with err: its
// readers and writers return, its slot is free, and what the guest still
// sends for it is dropped. The command is sent KILL in the background, so
// that a guest that does not read costs the caller no wait.
func (s *Session) Cancel(err error) {
	select {
	case <-s.done:
		return
	default:
	}
	if err == nil {
		err = errSessionEnded
	}
	go func() { _ = s.Signal("KILL") }()
	s.c.finish(s, Exit{}, err)
}

// Resize sets the terminal size (pty sessions).
func (s *Session) Resize(rows, cols uint16) error {
	return s.c.conn.Send(Resize{ID: s.id, Rows: rows, Cols: cols})
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait waits for the session to end and returns its Exit. The error is an
// Error from the agent, or ErrClosed (wrapped) if the connection ended
// first. Output still buffered remains readable after Wait returns.
func (s *Session) Wait() (Exit, error) {
	<-s.done
	return s.exit, s.err
}
