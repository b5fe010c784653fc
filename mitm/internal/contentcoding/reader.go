package contentcoding

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ErrCorrupt is wrapped by a Reader's error when the coded stream does not
// decode (corrupt, truncated, or a read of src failed mid-way).
var ErrCorrupt = errors.New("contentcoding: the coded body does not decode")

// NewReader returns src with the content codings of contentEncoding undone
// (the last applied is undone first), read as the caller reads: the pull
// form of Decoder, for a body that goes on decoded. A coding it does not
// know is an error wrapping ErrUnsupported, before anything is read; a
// corrupt or truncated stream is a Read error. Close releases the
// decoders, not src. Its output is not limited: the caller passes it on
// as it reads, and holds none of it.
func NewReader(contentEncoding string, src io.Reader) (io.ReadCloser, error) {
	codings, err := parse(contentEncoding)
	if err != nil {
		return nil, err
	}
	r := &reader{r: src}
	for i := len(codings) - 1; i >= 0; i-- {
		r.r = &lazy{coding: codings[i], src: r.r, closers: &r.closers}
	}
	return r, nil
}

type reader struct {
	r       io.Reader
	closers []func()
}

func (r *reader) Read(p []byte) (int, error) { return r.r.Read(p) }

func (r *reader) Close() error {
	for _, c := range r.closers {
		c()
	}
	r.closers = nil
	return nil
}

// lazy opens its decoder at the first Read: the gzip and zlib readers read
// their header when made, and the body's first bytes may not be there yet.
type lazy struct {
	coding  string
	src     io.Reader
	dec     io.Reader
	closers *[]func()
	err     error
}

func (l *lazy) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if l.dec == nil {
		br := bufio.NewReaderSize(l.src, 32<<10)
		if _, err := br.Peek(1); err != nil {
			l.err = err // io.EOF: an empty body decodes to nothing
			return 0, l.err
		}
		dec, closeDec, err := open(l.coding, br)
		if err != nil {
			l.err = fmt.Errorf("%w (%s): %w", ErrCorrupt, l.coding, err)
			return 0, l.err
		}
		l.dec = dec
		*l.closers = append(*l.closers, closeDec)
	}
	n, err := l.dec.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w (%s): %w", ErrCorrupt, l.coding, err)
		l.err = err
	}
	return n, err
}
