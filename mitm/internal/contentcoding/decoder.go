package contentcoding

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// DefaultLimit is the output limit used when NewDecoder is given zero or a
// negative limit.
const DefaultLimit = 64 << 20

// zstdMaxWindow bounds the memory a zstd stream may ask for. RFC 8878
// recommends that HTTP decoders support windows of at least 8 MiB and no
// more is needed for web content.
const zstdMaxWindow = 8 << 20

// ErrLimit is reported by Close when the decoded output reached the limit;
// the output stops there.
var ErrLimit = errors.New("contentcoding: decoded body reached the size limit; the rest was not decoded")

// ErrTrailingData is reported by Close when bytes followed the end of the
// compressed stream; everything before them was decoded.
var ErrTrailingData = errors.New("contentcoding: data after the end of the compressed stream was ignored")

// ErrUnsupported is wrapped by the error NewDecoder returns for a content
// coding it does not know. The caller should then leave the body unparsed.
var ErrUnsupported = errors.New("unsupported content coding")

// Supported reports whether NewDecoder accepts contentEncoding.
func Supported(contentEncoding string) bool {
	_, err := parse(contentEncoding)
	return err == nil
}

// Decoder undoes the content codings of a body pushed to it with Write and
// writes the decoded bytes to its destination. Write and Close must not be
// called concurrently with each other.
type Decoder struct {
	head    io.Writer // where the encoded input goes
	headCl  func()    // closes the input end of the first stage (nil for identity)
	out     *limitWriter
	wg      sync.WaitGroup
	stopped atomic.Bool // an error or the limit: discard further input
	closed  bool

	mu  sync.Mutex
	err error // the first error
}

// NewDecoder returns a Decoder that undoes contentEncoding (the value of a
// Content-Encoding header: one coding or a comma-separated list, in the order
// they were applied) and writes at most limit decoded bytes to dst; zero or
// less means DefaultLimit. dst is written from a goroutine of the Decoder
// (from Write itself when there is nothing to decode), one call at a time.
//
// An empty value and "identity" pass the body through. A coding it does not
// know is an error wrapping ErrUnsupported.
func NewDecoder(contentEncoding string, dst io.Writer, limit int64) (*Decoder, error) {
	codings, err := parse(contentEncoding)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	d := &Decoder{out: &limitWriter{w: dst, n: limit}}
	var next io.Writer = d.out
	var closeNext func() // closes the input end of the stage that next is
	for _, c := range codings {
		pr, pw := io.Pipe()
		d.wg.Add(1)
		go d.run(c, pr, next, closeNext)
		next = pw
		closeNext = func() { pw.Close() }
	}
	d.head, d.headCl = next, closeNext
	return d, nil
}

// parse splits a Content-Encoding value into its codings, dropping identity.
func parse(v string) ([]string, error) {
	var out []string
	for _, c := range strings.Split(v, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		switch c {
		case "", "identity":
		case "gzip", "x-gzip", "deflate", "br", "zstd":
			out = append(out, c)
		default:
			return nil, fmt.Errorf("contentcoding: %q: %w", c, ErrUnsupported)
		}
	}
	return out, nil
}

// Write feeds encoded bytes. It always returns len(p), nil; it blocks only
// while the bytes are decoded (and the destination consumes the output).
// After an error or the limit it discards its input.
func (d *Decoder) Write(p []byte) (int, error) {
	if d.closed || d.stopped.Load() || len(p) == 0 {
		return len(p), nil
	}
	if _, err := d.head.Write(p); err != nil {
		d.fail(err)
	}
	return len(p), nil
}

// Close ends the input, waits until everything decodable has been written to
// the destination, and returns the first error: a corrupt or truncated
// stream, ErrLimit, or the destination's write error.
func (d *Decoder) Close() error {
	if !d.closed {
		d.closed = true
		if d.headCl != nil {
			d.headCl()
		}
		d.wg.Wait()
	}
	return d.Err()
}

// Err returns the first error seen so far, or nil.
func (d *Decoder) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Decoded returns the number of decoded bytes written to the destination.
// It is safe to call only after Close.
func (d *Decoder) Decoded() int64 { return d.out.written }

func (d *Decoder) fail(err error) {
	d.stopped.Store(true)
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
}

// run decodes one coding: it reads the encoded bytes from pr and writes the
// decoded ones to next. When it stops, for whatever reason, it closes pr so
// that writers never block on it again, and it closes the next stage's input
// so that the next stage finishes too.
func (d *Decoder) run(coding string, pr *io.PipeReader, next io.Writer, closeNext func()) {
	defer d.wg.Done()
	defer func() {
		if closeNext != nil {
			closeNext()
		}
	}()
	err := decode(coding, pr, next)
	if err != nil {
		if !errors.Is(err, ErrLimit) && !errors.Is(err, errDst) && !errors.Is(err, ErrTrailingData) {
			err = fmt.Errorf("contentcoding: %s: %w", coding, err)
		}
		d.fail(err)
		pr.CloseWithError(err)
		return
	}
	// Bytes written after the end of the compressed stream are discarded;
	// their Write reports ErrTrailingData through Close.
	pr.CloseWithError(ErrTrailingData)
}

func decode(coding string, pr *io.PipeReader, next io.Writer) error {
	br := bufio.NewReaderSize(pr, 32<<10)
	if _, err := br.Peek(1); err != nil {
		if err == io.EOF {
			return nil // an empty body decodes to nothing
		}
		return err
	}
	r, closeR, err := open(coding, br)
	if err != nil {
		return err
	}
	defer closeR()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := next.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// open returns a reader of br decoded from coding, and what releases it.
func open(coding string, br *bufio.Reader) (io.Reader, func(), error) {
	nop := func() {}
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return zr, nop, nil
	case "deflate":
		// RFC 9110 says zlib (RFC 1950); some servers send raw deflate.
		if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && h[0]>>4 <= 7 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, nil, err
			}
			return zr, nop, nil
		}
		return flate.NewReader(br), nop, nil
	case "br":
		return brotli.NewReader(br), nop, nil
	case "zstd":
		zr, err := zstd.NewReader(br,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return nil, nil, fmt.Errorf("%q: %w", coding, ErrUnsupported)
}

// errDst marks an error returned by the destination writer.
var errDst = errors.New("contentcoding: the destination refused the decoded body")

// limitWriter writes at most n bytes to w, then fails with ErrLimit.
type limitWriter struct {
	w       io.Writer
	n       int64
	written int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, ErrLimit
	}
	over := int64(len(p)) > l.n
	if over {
		p = p[:l.n]
	}
	n, err := l.w.Write(p)
	l.n -= int64(n)
	l.written += int64(n)
	if err != nil {
		return n, fmt.Errorf("%w: %w", errDst, err)
	}
	if over {
		return n, ErrLimit
	}
	return n, nil
}
