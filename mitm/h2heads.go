package mitm

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/capsem/capsem/store"
)

// h2Heads follows the frames of one guest HTTP/2 connection as the server
// reads them and decodes every header block with an HPACK decoder of its
// own, in step with the server's (the same bytes in the same order build
// the same dynamic table), so that the order of a request's fields can be
// recorded (see wireorder.go). Frames other than HEADERS and CONTINUATION
// pass without being held. It never changes a byte the server reads; on
// input it does not follow (which the server answers with a connection
// error), it stops, and requests are then recorded with their headers
// sorted by name.
type h2Heads struct {
	q headQueue // its lock also guards the fields below

	off      bool
	preface  int     // preface bytes seen
	hdr      [9]byte // the frame header being read
	nhdr     int
	typ      byte
	flags    byte
	stream   uint32
	left     int    // payload bytes of the current frame still to come
	payload  []byte // the payload of a HEADERS or CONTINUATION frame
	block    []byte // a header block, until END_HEADERS
	inBlock  bool
	blockFor uint32 // the stream whose block is open
	dec      *hpack.Decoder
}

const (
	frameHeaders      = 0x1
	framePushPromise  = 0x5
	frameContinuation = 0x9

	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	// maxHeaderBlock bounds a header block the head reader holds: twice the most the
	// server accepts (its header list limit is about MaxHeaderBytes).
	maxHeaderBlock = 2 * maxHeadBytes
	// h2QueuedHeads bounds the heads of requests the server has not
	// handed to a handler yet; the server runs at most 250 streams at once
	// (x/net's default).
	h2QueuedHeads = 256
	// h2DecoderTableSize is the dynamic table the server's decoder has
	// (http2.Server's default MaxDecoderHeaderTableSize, advertised to the
	// guest as SETTINGS_HEADER_TABLE_SIZE).
	h2DecoderTableSize = 4096
)

func newH2Heads() *h2Heads {
	t := &h2Heads{dec: hpack.NewDecoder(h2DecoderTableSize, nil)}
	t.q.max = h2QueuedHeads
	return t
}

// feed passes b, bytes the server just read, through the head reader.
func (t *h2Heads) feed(b []byte) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	for len(b) > 0 && !t.off {
		switch {
		case t.preface < len(http2.ClientPreface):
			n := min(len(b), len(http2.ClientPreface)-t.preface)
			if string(b[:n]) != http2.ClientPreface[t.preface:t.preface+n] {
				t.stop()
				return
			}
			t.preface += n
			b = b[n:]
		case t.nhdr < len(t.hdr):
			n := copy(t.hdr[t.nhdr:], b)
			t.nhdr += n
			b = b[n:]
			if t.nhdr == len(t.hdr) {
				t.left = int(t.hdr[0])<<16 | int(t.hdr[1])<<8 | int(t.hdr[2])
				t.typ, t.flags = t.hdr[3], t.hdr[4]
				t.stream = binary.BigEndian.Uint32(t.hdr[5:]) & (1<<31 - 1)
				t.payload = t.payload[:0]
				if t.holds() && t.left > maxHeaderBlock {
					t.stop()
					return
				}
				if t.left == 0 {
					t.frameDone()
				}
			}
		default:
			n := min(len(b), t.left)
			if t.holds() {
				t.payload = append(t.payload, b[:n]...)
			}
			b, t.left = b[n:], t.left-n
			if t.left == 0 {
				t.frameDone()
			}
		}
	}
}

// holds says whether the current frame's payload is kept.
func (t *h2Heads) holds() bool { return t.typ == frameHeaders || t.typ == frameContinuation }

func (t *h2Heads) stop() {
	t.off, t.payload, t.block = true, nil, nil
}

// frameDone handles a frame whose payload is complete.
func (t *h2Heads) frameDone() {
	t.nhdr = 0
	if t.inBlock && t.typ != frameContinuation {
		t.stop() // RFC 9113 §6.10: a connection error
		return
	}
	switch t.typ {
	case frameHeaders:
		p := t.payload
		if t.flags&flagPadded != 0 {
			if len(p) < 1 || int(p[0]) > len(p)-1 {
				t.stop()
				return
			}
			p = p[1 : len(p)-int(p[0])]
		}
		if t.flags&flagPriority != 0 {
			if len(p) < 5 {
				t.stop()
				return
			}
			p = p[5:]
		}
		t.block, t.blockFor, t.inBlock = append(t.block[:0], p...), t.stream, true
	case frameContinuation:
		if !t.inBlock || t.stream != t.blockFor || len(t.block)+len(t.payload) > maxHeaderBlock {
			t.stop()
			return
		}
		t.block = append(t.block, t.payload...)
	case framePushPromise:
		t.stop() // a client never sends one
		return
	default:
		return
	}
	if t.flags&flagEndHeaders != 0 {
		t.inBlock = false
		t.decode()
	}
}

// decode decodes a complete header block, as the server does, and queues
// it when it opens a request (trailers only keep the table in step).
func (t *h2Heads) decode() {
	var h wireHead
	var authority, path, protocol string
	var fields []store.Header
	t.dec.SetEmitFunc(func(f hpack.HeaderField) {
		switch f.Name {
		case ":method":
			h.method = f.Value
		case ":path":
			path = f.Value
		case ":authority":
			authority = f.Value
		case ":protocol":
			protocol = f.Value
		default:
			if !strings.HasPrefix(f.Name, ":") {
				fields = append(fields, store.Header{Name: textproto.CanonicalMIMEHeaderKey(f.Name), Value: f.Value})
			}
		}
	})
	_, err := t.dec.Write(t.block)
	if err == nil {
		err = t.dec.Close()
	}
	t.block = t.block[:0]
	if err != nil {
		t.stop() // the server's decoder fails too: a connection error
		return
	}
	if h.method == "" {
		return
	}
	h.target = path
	if h.method == http.MethodConnect && protocol == "" {
		h.target = authority // as the server sets RequestURI
	}
	if protocol != "" {
		// The server hands :protocol over as a header of that name.
		fields = append([]store.Header{{Name: ":protocol", Value: protocol}}, fields...)
	}
	h.fields = fields
	t.q.push(h)
}

func (t *h2Heads) match(r *http.Request) []store.Header {
	return t.q.match(r.Method, r.RequestURI, r.Header)
}

// h2HeadsConn is a guest's HTTP/2 connection after the TLS handshake, as the
// HTTP/2 server reads and writes it: every byte read passes through the head reader
// (when there is one), every write goes through a writeBehind. Its
// ConnectionState is the TLS connection's.
type h2HeadsConn struct {
	*tls.Conn
	heads *h2Heads
	wb    *writeBehind
}

func newH2HeadsConn(tc *tls.Conn, heads *h2Heads) *h2HeadsConn {
	return &h2HeadsConn{Conn: tc, heads: heads, wb: newWriteBehind(tc)}
}

func (c *h2HeadsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.heads != nil {
		c.heads.feed(b[:n])
	}
	return n, err
}

func (c *h2HeadsConn) Write(b []byte) (int, error) { return c.wb.Write(b) }

// Close sends what the server wrote before it, then closes the TLS
// connection.
func (c *h2HeadsConn) Close() error {
	c.wb.close()
	return c.Conn.Close()
}

// serveH2 is the HTTP server's "h2" protocol: x/net's HTTP/2 server (the
// code net/http bundles) on the followed connection, since the bundled one
// only takes a *tls.Conn and so cannot be shown the bytes it reads. h is
// net/http's per-connection handler, whose BaseContext carries the flow.
func (p *Proxy) serveH2(hs *http.Server, tc *tls.Conn, h http.Handler) {
	var ctx context.Context
	if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
		ctx = bc.BaseContext()
	}
	var heads *h2Heads
	if gc, ok := tc.NetConn().(*guestConn); ok {
		heads = gc.flow.h2heads
	}
	p.h2.ServeConn(newH2HeadsConn(tc, heads), &http2.ServeConnOpts{Context: ctx, Handler: h, BaseConfig: hs})
}
