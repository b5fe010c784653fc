package mitm

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/capsem/capsem/store"
)

// Headers in wire order. http.Header is a map, so the order in which a
// client or server sent its header lines is gone by the time a handler or
// a response reaches the MITM; an investigator needs it (a header a tool
// sent first, a duplicate slipped in between, a Transfer-Encoding next to
// a Content-Length). The head readers that parse heads as they cross the wire (the
// guest's HTTP/1.1 requests: h1Heads; responses on the fast HTTP/1.1
// upstream path: peekResponseFields) hand their fields over, and
// inWireOrder checks that they describe the very header Go parsed before
// they are recorded. When they do not, the header is recorded sorted by
// name, as before.

// wireHead is one request head as it crossed the wire.
type wireHead struct {
	method, target string
	fields         []store.Header // canonical names, values as Go's parser keeps them
}

const (
	// maxQueuedHeads bounds the heads an HTTP/1.1 head reader keeps for requests
	// the server has not handed to the handler yet: pipelined requests the
	// server read ahead (at most its 4 KiB buffer's worth), or junk parsed
	// after a protocol switch.
	maxQueuedHeads = 16
	// maxQueuedBytes bounds the fields a queue holds, whatever the count:
	// heads the server refuses are never claimed and wait to be pushed out.
	maxQueuedBytes = 4 << 20
)

// headQueue is the heads a head reader parsed and no request has claimed yet.
type headQueue struct {
	mu    sync.Mutex
	heads []wireHead
	max   int // heads kept; 0 means maxQueuedHeads
	bytes int // field bytes in heads
}

func headBytes(h wireHead) int {
	n := len(h.method) + len(h.target)
	for _, f := range h.fields {
		n += len(f.Name) + len(f.Value)
	}
	return n
}

func (q *headQueue) push(h wireHead) {
	limit := q.max
	if limit == 0 {
		limit = maxQueuedHeads
	}
	size := headBytes(h)
	for len(q.heads) > 0 && (len(q.heads) >= limit || q.bytes+size > maxQueuedBytes) {
		q.drop(1)
	}
	q.heads = append(q.heads, h)
	q.bytes += size
}

// drop forgets the n oldest heads.
func (q *headQueue) drop(n int) {
	for _, h := range q.heads[:n] {
		q.bytes -= headBytes(h)
	}
	q.heads = slices.Delete(q.heads, 0, n)
}

// match finds the first queued head that is this request's, drops it and
// every head before it (requests the server refused before a handler ran),
// and returns its fields in wire order; nil when none matches.
func (q *headQueue) match(method, target string, h http.Header) []store.Header {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, hd := range q.heads {
		if hd.method != method || hd.target != target {
			continue
		}
		if out, ok := inWireOrder(h, hd.fields); ok {
			q.drop(i + 1)
			return out
		}
	}
	return nil
}

// consumedHeaders are the headers Go's parsers may take out of http.Header
// into fields of their own: Host into Request.Host; the framing headers
// into ContentLength and TransferEncoding (de-duplicated or dropped); and,
// in the HTTP/2 server, Expect: 100-continue and Trailer. They are recorded
// as the wire has them and not compared.
var consumedHeaders = map[string]bool{"Host": true, "Transfer-Encoding": true, "Content-Length": true, "Expect": true, "Trailer": true}

// inWireOrder returns h's fields in the order of wire when wire is the same
// header as h: every value of every name, in the same order per name. ok is
// false when they differ, and the caller records h sorted instead.
func inWireOrder(h http.Header, wire []store.Header) (out []store.Header, ok bool) {
	wire = mergeCookies(h, wire)
	used := make(map[string]int, len(h))
	out = make([]store.Header, 0, len(wire))
	for _, f := range wire {
		if consumedHeaders[f.Name] {
			out = append(out, f)
			continue
		}
		vals := h[f.Name]
		i := used[f.Name]
		if i >= len(vals) || vals[i] != f.Value {
			return nil, false
		}
		used[f.Name] = i + 1
		out = append(out, f)
	}
	for k, vals := range h {
		if used[k] == len(vals) || consumedHeaders[k] {
			continue
		}
		// Go's server adds Cache-Control: no-cache to a request with
		// Pragma: no-cache and no Cache-Control; the guest did not send it.
		if k == "Cache-Control" && used[k] == 0 && len(vals) == 1 && vals[0] == "no-cache" && len(h["Pragma"]) > 0 && h["Pragma"][0] == "no-cache" {
			continue
		}
		return nil, false
	}
	return out, true
}

// mergeCookies folds the Cookie fields of wire into one, at the first's
// place, when h has them joined: Go's HTTP/2 server joins the crumbs
// browsers split a Cookie header into (RFC 9113 §8.2.3).
func mergeCookies(h http.Header, wire []store.Header) []store.Header {
	c := h["Cookie"]
	if len(c) != 1 {
		return wire
	}
	var crumbs []string
	first := -1
	for i, f := range wire {
		if f.Name == "Cookie" {
			if first < 0 {
				first = i
			}
			crumbs = append(crumbs, f.Value)
		}
	}
	if len(crumbs) < 2 || strings.Join(crumbs, "; ") != c[0] {
		return wire
	}
	out := make([]store.Header, 0, len(wire)-len(crumbs)+1)
	for i, f := range wire {
		switch {
		case i == first:
			out = append(out, store.Header{Name: "Cookie", Value: c[0]})
		case f.Name != "Cookie":
			out = append(out, f)
		}
	}
	return out
}
