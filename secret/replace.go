package secret

import (
	"bytes"
	"errors"
	"io"
)

// Replacer writes what is written to it on to w with every occurrence of
// old replaced by new, as bytes.ReplaceAll would on the whole stream,
// whatever the chunks: it holds back the end of a write that old starts
// with (a match may start there) until the next write or Close.
type Replacer struct {
	old, new []byte
	w        io.Writer
	buf      []byte // held back: shorter than old
	n        int    // replacements made
}

// NewReplacer returns a Replacer of old by new writing to w. old must not
// be empty.
func NewReplacer(w io.Writer, old, new []byte) (*Replacer, error) {
	if len(old) == 0 {
		return nil, errors.New("secret: nothing to replace (an empty pattern)")
	}
	return &Replacer{old: bytes.Clone(old), new: bytes.Clone(new), w: w}, nil
}

// Write replaces and writes on all of p it can be sure of.
func (r *Replacer) Write(p []byte) (int, error) {
	data := p
	if len(r.buf) > 0 {
		data = append(r.buf, p...)
	}
	pos := 0
	for {
		i := bytes.Index(data[pos:], r.old)
		if i < 0 {
			break
		}
		if err := r.emit(data[pos : pos+i]); err != nil {
			return 0, err
		}
		if err := r.emit(r.new); err != nil {
			return 0, err
		}
		r.n++
		pos += i + len(r.old)
	}
	// Only a suffix that old starts with is held back: a stream that
	// pauses (an interactive upload) is held up only when its last bytes
	// could be the start of a placeholder.
	cut := pos + partialPrefix(data[pos:], r.old)
	if err := r.emit(data[pos:cut]); err != nil {
		return 0, err
	}
	r.buf = append(r.buf[:0:0], data[cut:]...)
	return len(p), nil
}

func (r *Replacer) emit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := r.w.Write(b)
	return err
}

// Close writes what is held back (it cannot be the start of a match any
// more). It does not close w.
func (r *Replacer) Close() error {
	err := r.emit(r.buf)
	r.buf = nil
	return err
}

// Count is how many replacements were made so far.
func (r *Replacer) Count() int { return r.n }
