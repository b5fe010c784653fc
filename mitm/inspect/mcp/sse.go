package mcp

import (
	"bytes"
	"io"
	"sync"

	"github.com/capsem/capsem/mitm/internal/mcpscan"
)

// sseRewriter passes an MCP event stream (text/event-stream) from the
// upstream to the guest event by event, so that capsem can change it at
// event boundaries only:
//
//   - rewrite may replace a whole event (a tools/list result with the
//     tools the policy denies left out, under [mcp] hide_denied);
//   - inject adds an event of capsem's own between two events: the
//     JSON-RPC error of a refused request, on the HTTP+SSE transport's GET
//     stream, which is where that transport's client reads its responses.
//
// An event larger than the splitter's cap is passed on in pieces as it
// comes, never rewritten, and no event is injected inside it. A goroutine
// reads the upstream, so that an injected event reaches a guest waiting on
// a quiet stream at once.
type sseRewriter struct {
	src     io.ReadCloser
	rewrite func(raw []byte) []byte // a replacement for a whole event, or nil to keep it

	mu       sync.Mutex
	space    *sync.Cond   // signalled when the guest has read, or on Close
	out      bytes.Buffer // ready for the guest
	queued   [][]byte     // injected while an event was in pieces
	midEvent bool         // the last bytes passed on were a piece of an oversize event
	done     bool
	err      error
	wake     chan struct{}
	closed   chan struct{}
	isClosed bool          // closed, under mu
	pumped   chan struct{} // closed when pump has returned
	once     sync.Once
}

// sseMaxEvent is the largest event that may be rewritten (whole events are
// held until their end): a tools/list result of a few hundred tools is
// well under it.
const sseMaxEvent = 4 << 20

// sseMaxAhead bounds what the rewriter reads from the upstream ahead of
// the guest: the pump waits while this much is ready and unread, so a
// guest that stops reading makes the upstream wait (as a plain copy
// would), not the host buffer the stream.
const sseMaxAhead = 256 << 10

// sseMaxInjected bounds the refusals waiting for a guest that does not
// read its stream; past it one is dropped (the guest, not reading, would
// not see it either) and counted in the event's detail.
const sseMaxInjected = 1 << 20

func newSSERewriter(src io.ReadCloser, rewrite func([]byte) []byte) *sseRewriter {
	r := &sseRewriter{src: src, rewrite: rewrite, wake: make(chan struct{}, 1), closed: make(chan struct{}), pumped: make(chan struct{})}
	r.space = sync.NewCond(&r.mu)
	go r.pump()
	return r
}

func (r *sseRewriter) pump() {
	defer close(r.pumped)
	split := mcpscan.NewEventSplitter(sseMaxEvent, func(raw []byte, complete bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !complete {
			r.out.Write(raw)
			r.midEvent = true
			return
		}
		if r.midEvent {
			// The end of an oversize event.
			r.out.Write(raw)
			r.midEvent = false
		} else if r.rewrite != nil {
			if repl := r.rewrite(raw); repl != nil {
				raw = repl
			}
			r.out.Write(raw)
		} else {
			r.out.Write(raw)
		}
		for _, q := range r.queued {
			r.out.Write(q)
		}
		r.queued = nil
	})
	buf := make([]byte, 32<<10)
	for {
		r.mu.Lock()
		for r.out.Len() >= sseMaxAhead && !r.isClosed {
			r.space.Wait()
		}
		r.mu.Unlock()
		n, err := r.src.Read(buf)
		if n > 0 {
			split.Write(buf[:n])
			r.signal()
		}
		if err != nil {
			split.Close()
			r.mu.Lock()
			r.done, r.err = true, err
			r.mu.Unlock()
			r.signal()
			return
		}
	}
}

func (r *sseRewriter) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// inject sends ev (one whole event) to the guest at the next event
// boundary.
func (r *sseRewriter) inject(ev []byte) bool {
	r.mu.Lock()
	queued := r.out.Len()
	for _, q := range r.queued {
		queued += len(q)
	}
	if queued+len(ev) > sseMaxInjected {
		r.mu.Unlock()
		return false
	}
	if r.midEvent {
		r.queued = append(r.queued, ev)
	} else {
		r.out.Write(ev)
	}
	r.mu.Unlock()
	r.signal()
	return true
}

func (r *sseRewriter) Read(b []byte) (int, error) {
	for {
		r.mu.Lock()
		if r.out.Len() > 0 {
			n, _ := r.out.Read(b)
			r.space.Signal()
			r.mu.Unlock()
			return n, nil
		}
		if r.done {
			err := r.err
			r.mu.Unlock()
			return 0, err
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-r.closed:
			return 0, io.ErrClosedPipe
		}
	}
}

// Close ends the stream and waits for the pump to return, so that nothing
// it does (a rewrite noting on the exchange's event) outlives the body.
func (r *sseRewriter) Close() error {
	var err error
	r.once.Do(func() {
		close(r.closed)
		r.mu.Lock()
		r.isClosed = true
		r.space.Broadcast()
		r.mu.Unlock()
		err = r.src.Close()
		<-r.pumped
	})
	return err
}
