package mitm

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"strconv"
	"sync/atomic"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/mitm/internal/contentcoding"
	"github.com/capsem/capsem/secret"
)

// errRefusedBody ends a request body in which the guard found what may not
// leave: the request is cancelled, and the exchange answers the guest 403.
var errRefusedBody = errors.New("mitm: the request body carries what capsem refuses to send")

// bodyGuard is a request body on its way upstream. It scans the guest's
// bytes for leaked secrets and (DLP) credentials, and holds back the bytes
// a match may still start in, so that when it refuses, no byte of the match
// has been forwarded; then it puts the bound secrets' real values in place
// of their placeholders.
//
// The bytes it holds back are only those that could begin a match (the
// end of a read that a pattern starts with), so a streamed upload that
// pauses is held up only when it pauses in such a place.
type bodyGuard struct {
	src io.ReadCloser

	leaks    *secret.Stream // nil: no secrets
	dlp      *dlp.Stream    // nil: no scan
	dlpBlock bool           // a DLP match refuses the request (else it is noted)
	exempt   [][]byte       // values DLP lets through (the bound secrets' own)

	reps    []*secret.Replacer // bound secrets, chained; nil: nothing to replace
	out     bytes.Buffer       // what the replacers wrote
	read    int64              // bytes read from src
	passed  int64              // bytes passed on (before replacement)
	held    []byte             // read, scanned, not passed on yet
	dst     []byte             // the caller's buffer during a Read: guardSink writes there first
	dn      int                // bytes written to dst
	buf     []byte             // reads when not reading into the caller's buffer
	bufSize int                // of buf, made on the first read that needs it; 0: 32 KiB

	onLeak func(*leak)          // a leak: the exchange refuses
	onDLP  func(dlp.Match) bool // a DLP match: the exchange notes it; true refuses
	// atEOF checks what arrives with the end of the body (a request's
	// trailer); true refuses. Nil: nothing to check.
	atEOF func() bool
	view  *secretView
	err   error
	eof   bool
}

func (g *bodyGuard) Close() error { return g.src.Close() }

func (g *bodyGuard) Read(p []byte) (int, error) {
	for {
		if g.out.Len() > 0 {
			return g.out.Read(p)
		}
		if g.err != nil {
			return 0, g.err
		}
		if g.eof {
			return 0, io.EOF
		}
		g.dst, g.dn = p, 0
		n, err := g.fill(p)
		n += g.dn
		g.dst = nil
		if n > 0 {
			return n, nil
		}
		if err != nil && err != io.EOF {
			g.err = err
		}
	}
}

// fill reads from src and scans; it returns bytes it placed in p for the
// caller (the fast path: nothing held, nothing to replace), else it queues
// them in held or out.
func (g *bodyGuard) fill(p []byte) (int, error) {
	var chunk []byte
	direct := len(g.held) == 0 && g.reps == nil
	buf := p
	if !direct {
		if g.buf == nil {
			g.buf = make([]byte, cmp.Or(g.bufSize, 32<<10))
		}
		buf = g.buf
	}
	n, err := g.src.Read(buf)
	chunk = buf[:n]
	start := g.read
	g.read += int64(n)
	if err == io.EOF {
		g.eof = true
	} else if err != nil {
		return 0, err
	}
	if n > 0 && !g.scan(chunk, start) {
		return 0, g.err
	}
	if g.eof && g.dlp != nil {
		for _, m := range g.dlp.Close() {
			if g.dlpHit(m) {
				return 0, g.err
			}
		}
	}
	if g.eof && g.atEOF != nil && g.atEOF() {
		g.err = errRefusedBody
		return 0, g.err
	}
	safe := g.read
	if !g.eof {
		if g.leaks != nil {
			safe = min(safe, g.leaks.Safe())
		}
		if g.dlp != nil && g.dlpBlock {
			safe = min(safe, g.dlp.Safe())
		}
	}
	if direct {
		ok := int(safe - start) // bytes of chunk that may go on
		ok = max(0, min(ok, n))
		g.held = append(g.held, chunk[ok:]...)
		g.passed += int64(ok)
		return ok, nil
	}
	ok := int(safe - g.passed)
	if len(g.held) == 0 {
		// Nothing held: what may go on goes straight from the chunk.
		ok = max(0, min(ok, n))
		if err := g.emit(chunk[:ok]); err != nil {
			return 0, err
		}
		g.held = append(g.held, chunk[ok:]...)
	} else {
		g.held = append(g.held, chunk...)
		ok = max(0, min(ok, len(g.held)))
		if err := g.emit(g.held[:ok]); err != nil {
			return 0, err
		}
		g.held = g.held[ok:]
	}
	if g.eof {
		// At the end nothing can start a match any more: safe was the
		// whole body and nothing is held; the replacers give what they
		// hold back.
		for _, r := range g.reps {
			if err := r.Close(); err != nil {
				return 0, err
			}
		}
	}
	return 0, nil
}

// emit passes b on through the replacers.
func (g *bodyGuard) emit(b []byte) error {
	g.passed += int64(len(b))
	if g.reps == nil {
		guardSink{g}.Write(b)
		return nil
	}
	_, err := g.reps[0].Write(b)
	return err
}

// scan checks chunk, which starts at stream offset start; false when the
// body is refused.
func (g *bodyGuard) scan(chunk []byte, start int64) bool {
	if g.leaks != nil {
		if h, ok := g.leaks.Write(chunk); ok {
			g.err = errRefusedBody
			g.onLeak(g.view.leakOf(h, "body@"+strconv.FormatInt(h.Offset, 10)))
			return false
		}
	}
	if g.dlp != nil {
		for _, m := range g.dlp.Write(chunk) {
			if g.dlpHit(m) {
				return false
			}
		}
	}
	return true
}

// dlpHit hands m to the exchange unless it is an exempt value; true when
// the body is refused.
func (g *bodyGuard) dlpHit(m dlp.Match) bool {
	for _, v := range g.exempt {
		if bytes.Equal(m.Value, v) {
			return false
		}
	}
	if g.onDLP(m) {
		g.err = errRefusedBody
		return true
	}
	return false
}

// bufFor is the size of a guard's read buffer for a body of length n (-1:
// unknown): a small body gets a small one, since a buffer per request was
// a tenth of the guard's cost at 4,000 requests/s; 32 KiB at most, as a
// TLS record holds 16 KiB and a read returns at most that.
func bufFor(n int64) int {
	if n < 0 || n >= 32<<10 {
		return 32 << 10
	}
	return max(int(n)+1, 512)
}

// guardSink is where the guard's output goes: into the caller's buffer of
// the Read in progress, and what does not fit into out, for the next Read.
// Writing straight into the caller's buffer saves a copy of every byte.
type guardSink struct{ g *bodyGuard }

func (s guardSink) Write(b []byte) (int, error) {
	g := s.g
	k := copy(g.dst[g.dn:], b)
	g.dn += k
	if k < len(b) {
		g.out.Write(b[k:])
	}
	return len(b), nil
}

// chainReplacers returns replacers of each pair (placeholder, real), the
// first writing to the second and so on, the last to w.
func chainReplacers(w io.Writer, pairs [][2][]byte) []*secret.Replacer {
	reps := make([]*secret.Replacer, len(pairs))
	for i := len(pairs) - 1; i >= 0; i-- {
		r, err := secret.NewReplacer(w, pairs[i][0], pairs[i][1])
		if err != nil {
			panic(err) // a placeholder is never empty (policy.Bind)
		}
		reps[i], w = r, r
	}
	return reps
}

// codedGuard scans a body that has a content coding (gzip, br, zstd, …):
// its bytes go on unchanged, and a copy is decoded on the side and scanned
// by g. A hit cancels the request (the exchange's onLeak or onDLP) and the
// body ends with errRefusedBody; the coded bytes that went before it carry
// at most a prefix of the match, compressed. Such a body is never
// rewritten: a placeholder in it stays one.
type codedGuard struct {
	src io.ReadCloser
	dec *contentcoding.Decoder
	g   *bodyGuard  // scans what dec writes, in dec's goroutine
	off int64       // decoded bytes scanned
	hit atomic.Bool // g refused: set in dec's goroutine
}

func newCodedGuard(src io.ReadCloser, coding string, g *bodyGuard) (*codedGuard, error) {
	c := &codedGuard{src: src, g: g}
	dec, err := contentcoding.NewDecoder(coding, scanWriter{c}, MaxDecodedForParsing)
	if err != nil {
		return nil, err
	}
	c.dec = dec
	return c, nil
}

type scanWriter struct{ c *codedGuard }

func (w scanWriter) Write(p []byte) (int, error) {
	if !w.c.hit.Load() && !w.c.g.scan(p, w.c.off) {
		w.c.hit.Store(true)
	}
	w.c.off += int64(len(p))
	return len(p), nil
}

func (c *codedGuard) Read(p []byte) (int, error) {
	n, err := c.src.Read(p)
	if n > 0 {
		c.dec.Write(p[:n])
	}
	if err == io.EOF {
		c.dec.Close() // waits for the decoder: everything is scanned
		if c.g.dlp != nil && !c.hit.Load() {
			for _, m := range c.g.dlp.Close() {
				if c.g.dlpHit(m) {
					c.hit.Store(true)
					break
				}
			}
		}
		if !c.hit.Load() && c.g.atEOF != nil && c.g.atEOF() {
			c.hit.Store(true)
		}
	}
	if c.hit.Load() {
		return 0, errRefusedBody
	}
	return n, err
}

func (c *codedGuard) Close() error {
	c.dec.Close()
	return c.src.Close()
}
