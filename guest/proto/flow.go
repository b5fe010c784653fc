package proto

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Flow control. Every data stream of a session (stdin, stdout, stderr) has a
// window: the receiver announces how many bytes it will buffer (Hello.Window
// for stdin, Exec.Window for output), the sender keeps a Credit and sends no
// more than it holds, and the receiver's Inbox returns credit with a Window
// message as its consumer reads. A sender with no credit blocks — for the
// agent that means it stops reading the command's pipe, so the command
// blocks in write(2) — and the receiver's memory per stream never exceeds
// its window. A sender that overruns the window is a protocol violation
// (ErrWindowExceeded), not a reason to buffer more.

// ErrWindowExceeded means a peer sent more data than its credit allowed.
var ErrWindowExceeded = errors.New("proto: peer sent more data than the window allows")

// Credit is the sending side of a window. It is safe for concurrent use.
type Credit struct {
	mu     sync.Mutex
	cond   sync.Cond
	n      int64
	closed error
}

// NewCredit returns a Credit holding n bytes.
func NewCredit(n uint32) *Credit {
	c := &Credit{n: int64(n)}
	c.cond.L = &c.mu
	return c
}

// Take waits until some credit is available and takes up to max bytes of
// it, returning how many. After Close it returns the close error.
func (c *Credit) Take(max int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.n == 0 && c.closed == nil {
		c.cond.Wait()
	}
	if c.closed != nil {
		return 0, c.closed
	}
	n := int64(max)
	if n > c.n {
		n = c.n
	}
	c.n -= n
	return int(n), nil
}

// Add returns n bytes of credit (from the peer's Window message). Credit
// beyond MaxWindow is a protocol violation.
func (c *Credit) Add(n uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n+int64(n) > MaxWindow {
		return fmt.Errorf("%w: credit would reach %d bytes", ErrWindowExceeded, c.n+int64(n))
	}
	c.n += int64(n)
	c.cond.Broadcast()
	return nil
}

// Available reports the credit held now.
func (c *Credit) Available() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.n)
}

// Close wakes every Take with err (io.ErrClosedPipe if nil). Later calls do
// nothing.
func (c *Credit) Close(err error) {
	if err == nil {
		err = io.ErrClosedPipe
	}
	c.mu.Lock()
	if c.closed == nil {
		c.closed = err
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// Inbox is the receiving side of a window: Push queues data from the peer
// (never blocking), Read hands it to the consumer and gives credit back
// through ack once a quarter of the window has been consumed. It is an
// io.Reader; Read and Push may be called from different goroutines.
//
// Its memory is at most twice its window, whatever the sizes of the
// pushes: a push of up to smallPush bytes is copied into a buffer of the
// inbox's own, filled before another is made, while a larger one is kept
// as it came (the frame's body, no copy on the bulk path). Keeping every
// push as it came cost a slice header and an allocation each: a 1 MiB
// window of 1-byte frames held 25.5 MiB (TestClientTinyFramesBoundedMemory).
type Inbox struct {
	mu      sync.Mutex
	cond    sync.Cond
	chunks  [][]byte
	owned   bool // the last chunk is the inbox's own buffer, with room to append
	queued  int  // bytes in chunks
	unacked int  // bytes consumed but not yet returned as credit
	window  int
	end     error // no more data will be pushed; Read gives end after the queue
	err     error // Read gives err at once
	ack     func(n uint32)
}

// NewInbox returns an Inbox for a window of window bytes (0: DefaultWindow).
// ack is called, from the reading goroutine and without locks held, to send
// the peer a Window message for n bytes.
func NewInbox(window uint32, ack func(n uint32)) *Inbox {
	if window == 0 {
		window = DefaultWindow
	}
	b := &Inbox{window: int(window), ack: ack}
	b.cond.L = &b.mu
	return b
}

// Window reports the inbox's window.
func (b *Inbox) Window() uint32 { return uint32(b.window) }

// Push queues p, which the inbox keeps (the caller must not reuse it). It
// returns ErrWindowExceeded when the peer overran its credit; data after
// CloseWrite or CloseWithError is dropped silently.
func (b *Inbox) Push(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.end != nil || b.err != nil {
		return nil
	}
	if b.queued+b.unacked+len(p) > b.window {
		return fmt.Errorf("%w: %d bytes in flight, window %d", ErrWindowExceeded, b.queued+b.unacked+len(p), b.window)
	}
	switch n := len(b.chunks); {
	case len(p) > smallPush:
		b.chunks = append(b.chunks, p)
		b.owned = false
	case n > 0 && b.owned && cap(b.chunks[n-1])-len(b.chunks[n-1]) >= len(p):
		b.chunks[n-1] = append(b.chunks[n-1], p...)
	default:
		// A buffer as large as a large push: at worst each is half full,
		// when small and large pushes alternate.
		buf := make([]byte, len(p), smallPush)
		copy(buf, p)
		b.chunks = append(b.chunks, buf)
		b.owned = true
	}
	b.queued += len(p)
	b.cond.Broadcast()
	return nil
}

// smallPush is the largest push an Inbox copies into a buffer of its own
// (of this size) rather than keeping. At a header and an allocation of
// ~32 bytes per chunk, chunks of at least 4 KiB add under 1%.
const smallPush = 4 << 10

// Read reads queued data, blocking until some arrives, the stream ends
// (io.EOF, after all queued data) or it is closed with an error.
func (b *Inbox) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b.mu.Lock()
	for b.queued == 0 && b.end == nil && b.err == nil {
		b.cond.Wait()
	}
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	if b.queued == 0 {
		err := b.end
		b.mu.Unlock()
		return 0, err
	}
	n := 0
	for n < len(p) && len(b.chunks) > 0 {
		c := copy(p[n:], b.chunks[0])
		n += c
		if c == len(b.chunks[0]) {
			b.chunks[0] = nil
			b.chunks = b.chunks[1:]
		} else {
			b.chunks[0] = b.chunks[0][c:]
		}
	}
	if len(b.chunks) == 0 {
		b.chunks, b.owned = nil, false // let the backing array go
	}
	b.queued -= n
	var ack int
	if b.end == nil {
		b.unacked += n
		if b.unacked >= b.window/4 || b.unacked > 0 && b.queued == 0 && b.unacked >= MaxData {
			ack, b.unacked = b.unacked, 0
		}
	}
	b.mu.Unlock()
	if ack > 0 && b.ack != nil {
		b.ack(uint32(ack))
	}
	return n, nil
}

// Buffered reports the bytes queued and not yet read.
func (b *Inbox) Buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queued
}

// CloseWrite marks the end of the stream: Read returns err (io.EOF if nil)
// once the queued data is read. Only the first call counts.
func (b *Inbox) CloseWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	b.mu.Lock()
	if b.end == nil {
		b.end = err
	}
	b.cond.Broadcast()
	b.mu.Unlock()
}

// CloseWithError discards queued data and makes Read return err (io.EOF if
// nil) from now on.
func (b *Inbox) CloseWithError(err error) {
	if err == nil {
		err = io.EOF
	}
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.chunks, b.queued, b.owned = nil, 0, false
	b.cond.Broadcast()
	b.mu.Unlock()
}
