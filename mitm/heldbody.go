package mitm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/capsem/capsem/store"
)

// errHoldBudget ends a held body whose bytes the flow's or the proxy's
// budget cannot take (limits.go).
var errHoldBudget = errors.New("mitm: the request bodies capsem holds before forwarding are at their bound")

// errHoldTimeout ends a held body that did not arrive within
// Config.HeldBodyDeadline.
var errHoldTimeout = errors.New("mitm: the request body did not arrive whole in time")

// heldBody is a request body read whole before it is forwarded: its
// bytes, and what they took from the flow's and the proxy's budgets. The
// bytes go back to the budgets as soon as the body has been read on to
// its end (the buffer is dropped then) or closed, or at the latest when
// the exchange finishes: a request whose answer streams for minutes (a
// model's) holds no budget while it streams.
type heldBody struct {
	ex   *exchange
	b    []byte
	off  int
	took atomic.Int64
	// more is the rest of a body longer than the limit, its first byte
	// read already; nil when the body ended within the limit.
	more io.Reader
}

// Bytes is the body as held (up to the limit).
func (h *heldBody) Bytes() []byte { return h.b }

// Over reports whether the body went on past the limit (more follows).
func (h *heldBody) Over() bool { return h.more != nil }

func (h *heldBody) Read(p []byte) (int, error) {
	if h.off < len(h.b) {
		n := copy(p, h.b[h.off:])
		h.off += n
		return n, nil
	}
	h.release()
	if h.more != nil {
		return h.more.Read(p)
	}
	return 0, io.EOF
}

// Close gives the bytes back; it does not close the request's body.
func (h *heldBody) Close() error {
	h.release()
	return nil
}

func (h *heldBody) release() {
	h.b = nil
	if n := h.took.Swap(0); n > 0 {
		h.ex.fs.held.give(n)
		h.ex.p.held.give(n)
	}
}

// readHeld reads r's body (through body, which may wrap it) whole, up to
// limit bytes, taking them from the flow's and the proxy's budgets as the
// buffer grows, within Config.HeldBodyDeadline. A body longer than limit
// comes back Over, the rest to be read from it.
func (ex *exchange) readHeld(w http.ResponseWriter, r *http.Request, body io.Reader, limit int64) (*heldBody, error) {
	// The server's own read deadline ends a stalled read on HTTP/1.1,
	// HTTP/2 and HTTP/3 alike; closing the body is the way left for a
	// writer that has none.
	rc := http.NewResponseController(w)
	var timedOut atomic.Bool
	d := ex.p.cfg.HeldBodyDeadline
	if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil {
		defer rc.SetReadDeadline(time.Time{})
	} else {
		t := time.AfterFunc(d, func() { timedOut.Store(true); r.Body.Close() })
		defer t.Stop()
	}
	failed := func(err error) error {
		if timedOut.Load() || errors.Is(err, os.ErrDeadlineExceeded) {
			return errHoldTimeout
		}
		return err
	}
	h := &heldBody{ex: ex}
	ex.heldBodies = append(ex.heldBodies, h)
	// A body of known length takes its whole buffer at once (the server
	// holds it to that length): growing one by doubling left up to its
	// size again as garbage, which 4,096 stalled flows turned into tens
	// of MiB the budget did not count. One of unknown length grows.
	next := func(c int64) int64 {
		if r.ContentLength >= 0 {
			return min(r.ContentLength, limit)
		}
		return min(max(2*c, 32<<10), limit)
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			n := next(int64(cap(buf)))
			if n <= int64(cap(buf)) {
				// At its size: the end, or a body longer than limit.
				h.b = buf
				var one [1]byte
				for {
					k, err := body.Read(one[:])
					if k > 0 {
						h.more = io.MultiReader(bytes.NewReader([]byte{one[0]}), body)
						return h, nil
					}
					if err == io.EOF {
						return h, nil
					}
					if err != nil {
						h.release()
						return nil, failed(err)
					}
				}
			}
			if !h.take(n - int64(cap(buf))) {
				h.release()
				return nil, errHoldBudget
			}
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		k, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		switch {
		case err == io.EOF:
			h.b = buf
			return h, nil
		case err != nil:
			h.release()
			return nil, failed(err)
		}
	}
}

// take takes n more bytes for h from the flow's and the proxy's budgets;
// false when either is spent.
func (h *heldBody) take(n int64) bool {
	ex := h.ex
	if !ex.fs.held.take(n) {
		return false
	}
	if !ex.p.held.take(n) {
		ex.fs.held.give(n)
		return false
	}
	h.took.Add(n)
	return true
}

// holdBody is readHeld that answers the guest itself when the body cannot
// be held: the guard refused it (403), the budgets are spent (503), it did
// not arrive in time (408), or it broke (400; the request stays allowed:
// the guest's body broke, not the policy). ok is false when it answered.
func (ex *exchange) holdBody(w http.ResponseWriter, r *http.Request, body io.Reader, limit int64) (*heldBody, bool) {
	h, err := ex.readHeld(w, r, body, limit)
	switch {
	case err == nil:
		return h, true
	case err == errRefusedBody:
		ex.answerRefusal(w)
	case ex.refuseHeld(w, err):
	default:
		ex.refuse(w, http.StatusBadRequest, ReasonUpstreamError, "reading the request body: "+err.Error(), "Send the request again.")
		ex.ev.Decision = store.Allowed
	}
	return nil, false
}

// releaseHeld gives back what the exchange's held bodies still hold.
func (ex *exchange) releaseHeld() {
	for _, h := range ex.heldBodies {
		h.release()
	}
}

// refuseHeld answers a request whose body could not be held: 503 when the
// budgets are spent, 408 when it did not arrive in time; false for another
// error, which the caller answers.
func (ex *exchange) refuseHeld(w http.ResponseWriter, err error) bool {
	if err != nil && ex.ev.HTTPVersion == "HTTP/1.1" {
		// The rest of the body is not read: net/http would read up to
		// 256 KiB more of it to keep the connection (the guest's bytes
		// capsem refused to hold), and 4,096 connections doing so at once
		// took a few hundred MiB.
		w.Header().Set("Connection", "close")
	}
	switch {
	case errors.Is(err, errHoldBudget):
		ex.refuse(w, http.StatusServiceUnavailable, ReasonBodyHoldBudget,
			fmt.Sprintf("capsem reads this request's body whole before forwarding it (to scan it, or to decide its MCP calls), and the bodies it holds are at their bound (%d MiB for this connection, %d MiB in all)", maxHeldPerFlow>>20, ex.p.held.max>>20),
			"Send the request again once the requests in flight are done, or send fewer large requests at once.")
	case errors.Is(err, errHoldTimeout):
		ex.refuse(w, http.StatusRequestTimeout, ReasonBodyTimeout, fmt.Sprintf("%v (%v)", err, ex.p.cfg.HeldBodyDeadline),
			"capsem reads this request's body whole before forwarding it (to scan it, or to decide its MCP calls); send the whole body promptly.")
	default:
		return false
	}
	return true
}
