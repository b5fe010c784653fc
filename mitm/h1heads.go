package mitm

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"strconv"
	"strings"

	"github.com/capsem/capsem/mitm/internal/fieldorder"
	"github.com/capsem/capsem/store"
)

// h1Heads follows the bytes of one guest HTTP/1.1 connection as the HTTP
// server reads them and parses each request head, so that the order of
// its header lines can be recorded (see wireorder.go). It frames bodies
// as Go's server does — chunked for an HTTP/1.1 request with
// Transfer-Encoding, else Content-Length, else none — to find the next
// head. It never changes a byte the server reads. On input it does not
// follow (or that Go's server would refuse, which ends the connection),
// and after a WebSocket upgrade, it stops: requests are then recorded with
// their headers sorted by name.
type h1Heads struct {
	q headQueue // its lock also guards the fields below

	st    headsState
	line  []byte // the current line, until its LF
	head  wireHead
	proto string
	size  int   // bytes of the current head (or trailer) so far
	left  int64 // body or chunk bytes still to pass
}

type headsState uint8

const (
	headsRequestLine headsState = iota
	headsField
	headsBody
	headsChunkSize
	headsChunkData
	headsChunkEnd
	headsTrailer
	headsOff
)

const (
	// maxHeadBytes is the largest head the head reader follows: the server's
	// MaxHeaderBytes plus the 4 KiB of slack Go's server allows.
	maxHeadBytes = 1<<20 + 4096
	// maxChunkLine bounds a chunk-size line (Go's chunked reader refuses
	// longer ones).
	maxChunkLine = 4096
)

// feed passes b, bytes the server just read, through the head reader.
func (t *h1Heads) feed(b []byte) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	for len(b) > 0 && t.st != headsOff {
		switch t.st {
		case headsBody, headsChunkData:
			n := min(int64(len(b)), t.left)
			b, t.left = b[n:], t.left-n
			if t.left == 0 {
				if t.st == headsBody {
					t.st = headsRequestLine
				} else {
					t.st = headsChunkEnd
				}
			}
		case headsChunkEnd:
			// Go reads exactly CRLF after a chunk's data.
			n := min(len(b), 2-len(t.line))
			t.line, b = append(t.line, b[:n]...), b[n:]
			if len(t.line) == 2 {
				if string(t.line) != "\r\n" {
					t.stop()
					return
				}
				t.line, t.st = t.line[:0], headsChunkSize
			}
		case headsRequestLine:
			if len(t.line) == 0 && (b[0] == '\r' || b[0] == '\n') {
				b = b[1:] // CRLF between requests (Go's server skips them after a POST)
				t.size = 0
				continue
			}
			fallthrough
		default:
			i := bytes.IndexByte(b, '\n')
			chunk := b
			if i >= 0 {
				chunk = b[:i]
			}
			if t.st == headsChunkSize {
				if len(t.line)+len(chunk) > maxChunkLine {
					t.stop()
					return
				}
			} else if t.size += len(chunk) + 1; t.size > maxHeadBytes {
				t.stop()
				return
			}
			t.line = append(t.line, chunk...)
			if i < 0 {
				return
			}
			b = b[i+1:]
			t.onLine(bytes.TrimSuffix(t.line, []byte("\r")))
			t.line = t.line[:0]
		}
	}
}

// stop ends the head reader: the rest of the connection is not followed. The
// caller holds q.mu.
func (t *h1Heads) stop() {
	t.st, t.line, t.head = headsOff, nil, wireHead{}
}

// stopFollowing ends the head reader from outside, as when the connection becomes
// a WebSocket.
func (t *h1Heads) stopFollowing() {
	t.q.mu.Lock()
	t.stop()
	t.q.drop(len(t.q.heads))
	t.q.mu.Unlock()
}

// onLine handles one complete line (without its line ending).
func (t *h1Heads) onLine(line []byte) {
	switch t.st {
	case headsRequestLine:
		method, rest, ok1 := strings.Cut(string(line), " ")
		target, proto, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 {
			t.stop()
			return
		}
		t.head, t.proto, t.st = wireHead{method: method, target: target}, proto, headsField
	case headsField:
		if len(line) > 0 {
			var ok bool
			if t.head.fields, ok = fieldorder.AddLine(t.head.fields, line); !ok {
				t.stop()
			}
			return
		}
		t.endHead()
	case headsChunkSize:
		size, _, _ := strings.Cut(string(line), ";")
		n, err := strconv.ParseUint(strings.Trim(size, " \t"), 16, 63)
		switch {
		case err != nil || strings.Trim(size, " \t") == "":
			t.stop()
		case n == 0:
			t.st, t.size = headsTrailer, 0
		default:
			t.st, t.left = headsChunkData, int64(n)
		}
	case headsTrailer:
		if len(line) == 0 {
			t.st, t.size = headsRequestLine, 0
		}
	}
}

// endHead queues the head just read and frames the body after it.
func (t *h1Heads) endHead() {
	h := t.head
	t.q.push(h)
	t.head, t.size = wireHead{}, 0
	var te, cl []string
	for _, f := range h.fields {
		switch f.Name {
		case "Transfer-Encoding":
			te = append(te, f.Value)
		case "Content-Length":
			cl = append(cl, f.Value)
		}
	}
	major, minor, ok := http.ParseHTTPVersion(t.proto)
	switch {
	case !ok:
		t.stop()
	case len(te) > 0 && (major > 1 || minor >= 1):
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") {
			t.stop() // Go's server refuses it and closes the connection
			return
		}
		t.st = headsChunkSize
	case len(cl) > 0:
		n, err := strconv.ParseUint(strings.Trim(cl[0], " \t"), 10, 63)
		for _, v := range cl[1:] {
			if strings.Trim(v, " \t") != strings.Trim(cl[0], " \t") {
				err = strconv.ErrSyntax
			}
		}
		switch {
		case err != nil:
			t.stop()
		case n == 0:
			t.st = headsRequestLine
		default:
			t.st, t.left = headsBody, int64(n)
		}
	default:
		t.st = headsRequestLine
	}
}

// match returns the wire-order fields of the request r, or nil.
func (t *h1Heads) match(r *http.Request) []store.Header {
	return t.q.match(r.Method, r.RequestURI, r.Header)
}

// h1HeadsConn is a guest's HTTP/1.1 connection after the TLS handshake, as the
// HTTP server reads it: every byte read passes through the head reader. It is not
// a *tls.Conn to the server, which therefore serves it as plain HTTP/1.1
// (the handshake and ALPN are done by then), and r.TLS is nil.
type h1HeadsConn struct {
	*tls.Conn
	fs    *flowState
	heads *h1Heads
}

func (c *h1HeadsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.heads.feed(b[:n])
	}
	return n, err
}
