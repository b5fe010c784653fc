package mitm

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"

	"github.com/capsem/capsem/store"
)

// Headers in wire order. http.Header is a map, so the order in which a
// client or server sent its header lines is gone by the time a handler or
// a response reaches the MITM; an investigator needs it (a header a tool
// sent first, a duplicate slipped in between, a Transfer-Encoding next to
// a Content-Length). The taps that parse heads as they cross the wire (the
// guest's HTTP/1.1 requests: h1Tap; responses on the fast HTTP/1.1
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
	// maxQueuedHeads bounds the heads an HTTP/1.1 tap keeps for requests
	// the server has not handed to the handler yet: pipelined requests the
	// server read ahead (at most its 4 KiB buffer's worth), or junk parsed
	// after a protocol switch.
	maxQueuedHeads = 16
	// maxQueuedBytes bounds the fields a queue holds, whatever the count:
	// heads the server refuses are never claimed and wait to be pushed out.
	maxQueuedBytes = 4 << 20
)

// headQueue is the heads a tap parsed and no request has claimed yet.
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

// addFieldLine adds one header line (without its line ending) to fields as
// Go's textproto reads it: a line that starts with a space or tab continues
// the previous field's value, joined by one space; otherwise it is
// "name: value" with the name canonicalized and the value trimmed. ok is
// false for a line Go would reject.
func addFieldLine(fields []store.Header, line []byte) ([]store.Header, bool) {
	if line[0] == ' ' || line[0] == '\t' {
		if len(fields) == 0 {
			return fields, false
		}
		last := &fields[len(fields)-1]
		last.Value = strings.TrimLeft(last.Value+" "+string(trimOWS(line)), " \t")
		return fields, true
	}
	name, value, ok := bytes.Cut(trimOWS(line), []byte(":"))
	if !ok || len(name) == 0 || !validFieldName(name) {
		return fields, false
	}
	return append(fields, store.Header{
		Name:  textproto.CanonicalMIMEHeaderKey(string(name)),
		Value: string(bytes.TrimLeft(value, " \t")),
	}), true
}

// trimOWS trims spaces and tabs at both ends.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// validFieldName reports whether name is an RFC 9110 token, as Go's
// server requires of header names.
func validFieldName(name []byte) bool {
	for _, c := range name {
		if !tokenByte[c] {
			return false
		}
	}
	return true
}

var tokenByte = func() (t [256]bool) {
	for c := range 256 {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			t[c] = true
		}
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()

// peekResponseFields returns the header fields of the response head at the
// start of br, in order, without consuming anything: http.ReadResponse
// reads the head afterwards as always. ok is false when the head does not
// fit br's buffer or the connection fails first (ReadResponse then reports
// the failure).
func peekResponseFields(br *bufio.Reader) (fields []store.Header, ok bool) {
	for n, from := 1, 0; ; {
		if _, err := br.Peek(n); err != nil {
			return nil, false
		}
		b, _ := br.Peek(br.Buffered())
		if end := headEnd(b, from); end >= 0 {
			return parseHeadFields(b[:end])
		}
		from = max(0, len(b)-3)
		n = len(b) + 1
	}
}

// headEnd returns the offset just past the blank line that ends the head
// at the start of b (CRLF or LF line endings), searching from from, or -1.
func headEnd(b []byte, from int) int {
	for i := from; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
}

// parseHeadFields parses the fields of a head (its first line, the status
// or request line, skipped).
func parseHeadFields(head []byte) ([]store.Header, bool) {
	_, rest, _ := bytes.Cut(head, []byte("\n"))
	var fields []store.Header
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		var ok bool
		if fields, ok = addFieldLine(fields, line); !ok {
			return nil, false
		}
	}
	return fields, true
}
