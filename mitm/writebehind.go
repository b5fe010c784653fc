package mitm

import (
	"io"
	"sync"
	"time"
)

// writeBehind is the write side of a guest's HTTP/2 connection: Write
// copies the bytes and returns, and one goroutine per connection encrypts
// and sends everything gathered since its last send, in order.
//
// Why: x/net's HTTP/2 server starts a new goroutine for every flush, and
// that goroutine ran crypto/tls and gVisor's TCP send path itself; their
// depth grew each new goroutine's stack two or three times, and copying
// stacks took 13 % of capsem-net's CPU in 16 concurrent small requests
// (runtime.copystack under tcp.(*sender).sendSegment and headerView).
// Here the flush goroutine only copies, the sending goroutine lives as
// long as the connection (its stack grows once), and the flushes of
// several streams that come while it sends go out as one TLS record and
// one segment.
//
// Memory is bounded: a Write waits while writeBehindMax bytes are waiting
// to be sent, so a guest that stops reading holds the server's writes as
// a blocking connection would; the buffers come from a pool and go back
// once sent, so an idle connection holds none. An error sending is
// returned by every later Write.
type writeBehind struct {
	w    io.Writer
	mu   sync.Mutex
	more sync.Cond // bytes came, or closing
	room sync.Cond // the sender took the bytes, or failed
	buf  []byte    // waiting to be sent; nil when nothing is
	bufp *[]byte   // buf's pool entry, to give back without allocating
	err  error     // the first send error: the connection is unusable
	shut bool      // Close was called: send what is left, then stop
	done chan struct{}
	// drain bounds how long close waits (writeBehindDrain).
	drain time.Duration
}

const (
	// writeBehindMax bounds the bytes waiting to be sent (four full TLS
	// records); a Write beyond it waits for the sender.
	writeBehindMax = 64 << 10
	// writeBehindDrain bounds how long Close waits for the bytes written
	// before it (a GOAWAY, the end of a response) to go out to a guest that
	// does not read them.
	writeBehindDrain = 2 * time.Second
)

// behindBufs hold the bytes of writeBehinds; never more than
// writeBehindMax, so never reallocated.
var behindBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, writeBehindMax)
	return &b
}}

func newWriteBehind(w io.Writer) *writeBehind {
	b := &writeBehind{w: w, done: make(chan struct{}), drain: writeBehindDrain}
	b.more.L = &b.mu
	b.room.L = &b.mu
	go b.send()
	return b
}

func (b *writeBehind) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for len(p) > 0 {
		for b.err == nil && !b.shut && len(b.buf) >= writeBehindMax {
			b.room.Wait()
		}
		if b.err != nil {
			return n, b.err
		}
		if b.shut {
			return n, io.ErrClosedPipe
		}
		if b.buf == nil {
			b.bufp = behindBufs.Get().(*[]byte)
			b.buf = (*b.bufp)[:0]
		}
		k := min(len(p), writeBehindMax-len(b.buf))
		b.buf = append(b.buf, p[:k]...)
		p, n = p[k:], n+k
		b.more.Signal()
	}
	return n, nil
}

// send runs for the connection's life: it takes what was written and
// writes it to w, until Close has been called and nothing is left, or a
// write fails.
func (b *writeBehind) send() {
	defer close(b.done)
	for {
		b.mu.Lock()
		for len(b.buf) == 0 && !b.shut {
			b.more.Wait()
		}
		if len(b.buf) == 0 { // shut, and everything sent
			b.mu.Unlock()
			return
		}
		out, outp := b.buf, b.bufp
		b.buf, b.bufp = nil, nil
		b.room.Broadcast()
		b.mu.Unlock()

		_, err := b.w.Write(out)
		*outp = out[:0]
		behindBufs.Put(outp)
		if err != nil {
			b.mu.Lock()
			b.err = err
			b.buf, b.bufp = nil, nil
			b.room.Broadcast()
			b.mu.Unlock()
			return
		}
	}
}

// close stops taking writes and waits until what was written is sent, the
// send fails, or writeBehindDrain has passed; the caller then closes the
// connection, which ends a send still blocked.
func (b *writeBehind) close() {
	b.mu.Lock()
	b.shut = true
	b.more.Signal()
	b.room.Broadcast()
	b.mu.Unlock()
	t := time.NewTimer(b.drain)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
	}
}
