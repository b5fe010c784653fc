package mitm

import (
	"bytes"
	"io"
	"sync"

	"github.com/capsem/capsem/mitm/mcpscan"
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
	out      bytes.Buffer // ready for the guest
	queued   [][]byte     // injected while an event was in pieces
	midEvent bool         // the last bytes passed on were a piece of an oversize event
	done     bool
	err      error
	wake     chan struct{}
	closed   chan struct{}
	once     sync.Once
}

// sseMaxEvent is the largest event that may be rewritten (whole events are
// held until their end): a tools/list result of a few hundred tools is
// well under it.
const sseMaxEvent = 4 << 20

func newSSERewriter(src io.ReadCloser, rewrite func([]byte) []byte) *sseRewriter {
	r := &sseRewriter{src: src, rewrite: rewrite, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	go r.pump()
	return r
}

func (r *sseRewriter) pump() {
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
func (r *sseRewriter) inject(ev []byte) {
	r.mu.Lock()
	if r.midEvent {
		r.queued = append(r.queued, ev)
	} else {
		r.out.Write(ev)
	}
	r.mu.Unlock()
	r.signal()
}

func (r *sseRewriter) Read(b []byte) (int, error) {
	for {
		r.mu.Lock()
		if r.out.Len() > 0 {
			n, _ := r.out.Read(b)
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

func (r *sseRewriter) Close() error {
	var err error
	r.once.Do(func() {
		close(r.closed)
		err = r.src.Close()
	})
	return err
}
