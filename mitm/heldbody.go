package mitm

import (
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

// readHeld reads r's body (through body, which may wrap it) whole, up to
// limit+1 bytes — a caller given more than limit refuses or streams the
// rest — taking the bytes it holds from the flow's and the proxy's budgets
// as the buffer grows, within Config.HeldBodyDeadline. What it took is given
// back when the exchange finishes (releaseHeld), since the bytes go on to
// the upstream from the buffer.
func (ex *exchange) readHeld(w http.ResponseWriter, r *http.Request, body io.Reader, limit int64) ([]byte, error) {
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
	// A body of known length takes its whole buffer at once: growing one
	// by doubling left up to its size again as garbage, which 4,096
	// stalled flows turned into tens of MiB the budget did not count.
	// One of unknown length grows.
	start := int64(32 << 10)
	if r.ContentLength >= 0 {
		start = min(r.ContentLength, limit) + 1
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf, nil
			}
			n := min(max(2*int64(cap(buf)), start), limit+1)
			if !ex.hold(n - int64(cap(buf))) {
				return nil, errHoldBudget
			}
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil && (timedOut.Load() || errors.Is(err, os.ErrDeadlineExceeded)):
			return nil, errHoldTimeout
		case err != nil:
			return nil, err
		}
	}
}

// holdBody is readHeld that answers the guest itself when the body cannot
// be held: the guard refused it (403), the budgets are spent (503), it did
// not arrive in time (408), or it broke (400; the request stays allowed:
// the guest's body broke, not the policy). ok is false when it answered.
func (ex *exchange) holdBody(w http.ResponseWriter, r *http.Request, body io.Reader, limit int64) ([]byte, bool) {
	b, err := ex.readHeld(w, r, body, limit)
	switch {
	case err == nil:
		return b, true
	case err == errRefusedBody:
		ex.answerRefusal(w)
	case ex.refuseHeld(w, err):
	default:
		ex.refuse(w, http.StatusBadRequest, ReasonUpstreamError, "reading the request body: "+err.Error(), "Send the request again.")
		ex.ev.Decision = store.Allowed
	}
	return nil, false
}

// hold takes n bytes for a held body from the flow's and the proxy's
// budgets; false when either is spent.
func (ex *exchange) hold(n int64) bool {
	if !ex.fs.held.take(n) {
		return false
	}
	if !ex.p.held.take(n) {
		ex.fs.held.give(n)
		return false
	}
	ex.heldBytes += n
	return true
}

// releaseHeld gives back what the exchange's held bodies took.
func (ex *exchange) releaseHeld() {
	if ex.heldBytes > 0 {
		ex.fs.held.give(ex.heldBytes)
		ex.p.held.give(ex.heldBytes)
		ex.heldBytes = 0
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
			"capsem reads a body up to 1 MiB whole before forwarding it; send the whole body promptly, or stream a large upload without a Content-Length.")
	default:
		return false
	}
	return true
}
