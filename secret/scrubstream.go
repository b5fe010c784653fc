package secret

import (
	"errors"
	"io"
)

// ScrubStream scrubs one stream: Write what arrives, Close at its end;
// what may go on is written to w as soon as no match can start in it.
type ScrubStream struct {
	s     *Scrubber
	w     io.Writer
	onHit func(ScrubHit)
	raw   []byte // bytes not passed on yet; raw[0] is at stream offset base
	base  int64
	edits []edit // sorted, within raw
	contig,
	lines *view
	lf   lineFold
	json *jsonFold
	// inBinary: the last piece was binary, and the folded views were
	// restarted after it.
	inBinary bool
	err      error
}

// binaryPiece reports whether a piece of the stream is binary rather than
// text: more than one byte in 64 a control character (text has none but
// whitespace; random or compressed bytes have one in 11). The folded
// views read text as a client puts it together, and skip binary: on a
// download from a bound host they cost two thirds of the MITM's rate
// (mitmbench, 1 GiB of every byte value: 96 % of no secrets before the
// folds, 61 % with them over every byte).
func binaryPiece(p []byte) bool {
	// It stops as soon as the count is past the bound: binary bytes decide
	// in their first KiB or two (counting every byte of a download was a
	// tenth of capsem-net's CPU).
	if len(p) < 512 {
		return false // too little to tell; the folds are cheap on it
	}
	n, need := 0, len(p)/64
	for i := 0; i < len(p); i += 256 {
		for _, c := range p[i:min(i+256, len(p))] {
			n += int(byteClass[c] >> classControlShift)
		}
		if n > need {
			return true
		}
	}
	return false
}

// edit replaces the stream's bytes [start, end) by repl (nil: deletes them).
type edit struct {
	start, end int64
	repl       []byte
}

// Stream starts scrubbing a stream that goes on to w; onHit is told of
// every value found.
func (s *Scrubber) Stream(w io.Writer, onHit func(ScrubHit)) *ScrubStream {
	st := &ScrubStream{s: s, w: w, onHit: onHit}
	st.contig = &view{m: s.contig, st: s.contig.Stream(), minHold: 1, ident: true}
	st.lines = &view{m: s.folded, st: s.folded.Stream(), minHold: s.hold, folded: true, lower: true}
	st.lf.v = st.lines
	st.json = &jsonFold{s: s, views: map[uint64]*view{}}
	return st
}

// scrubPiece is how much of a write the views take at a time: the raw
// spans of a piece's folded bytes are kept until it is scanned, so a
// smaller piece keeps fewer (a run a word of ordinary text).
const scrubPiece = 8 << 10

// Write scrubs p and writes on what may go. After an error (ErrHeldTooLong,
// or w's) it writes nothing more and returns the error.
func (st *ScrubStream) Write(p []byte) (int, error) {
	if st.err != nil {
		return 0, st.err
	}
	n := len(p)
	whole, direct := p, len(st.raw) == 0
	at := st.base + int64(len(st.raw))
	for len(p) > 0 {
		k := min(len(p), scrubPiece)
		st.contig.commitIdent(p[:k], at, st.hit)
		switch {
		case !binaryPiece(p[:k]):
			st.lf.feed(p[:k], at)
			st.lines.commit(st.hit)
			st.json.feed(p[:k], at)
			st.json.commit(st.hit)
			st.inBinary = false
		case !st.inBinary:
			// The folds are of text; binary bytes break a folded match
			// in progress as any byte outside a form's alphabet would.
			st.lines.restart()
			st.lf.slash = false
			st.json = &jsonFold{s: st.s, views: map[uint64]*view{}}
			st.inBinary = true
		}
		p = p[k:]
		at += int64(k)
	}
	if direct && len(st.edits) == 0 {
		// Nothing held before and nothing to replace: what may go on goes
		// from p itself, and only what is held is copied — a download's
		// bytes were copied twice more before (into the held bytes, then
		// out of them).
		safe := min(at, st.contig.holdFrom(), st.lines.holdFrom(), st.json.holdFrom())
		k := max(0, int(safe-st.base))
		if err := st.emit(whole[:k]); err != nil {
			st.err = err
			return 0, err
		}
		st.raw = append(st.raw, whole[k:]...)
		st.base += int64(k)
		return n, nil
	}
	st.raw = append(st.raw, whole...)
	if err := st.release(false); err != nil {
		st.err = err
		return 0, err
	}
	if len(st.raw) > MaxHeld {
		st.err = ErrHeldTooLong
		return 0, st.err
	}
	return n, nil
}

// Close writes what is held back: at the end no match can complete any
// more. It does not close w.
func (st *ScrubStream) Close() error {
	if st.err == errClosed {
		return nil
	}
	if st.err != nil {
		return st.err
	}
	st.lf.close(st.hit)
	if err := st.release(true); err != nil {
		st.err = err
		return err
	}
	st.err = errClosed
	return nil
}

var errClosed = errors.New("secret: write after Close")

// hit makes the edits of a match found by v at its offset hs.
func (st *ScrubStream) hit(v *view, h Hit, hs int64) {
	he := hs + int64(h.Len)
	passed := v.passed(hs, he, st.base)
	covered := false
	var parts []span
	for _, sp := range v.spans(hs, he) {
		if sp.end <= st.base {
			continue
		}
		sp.start = max(sp.start, st.base)
		rest, cut := st.uncovered(sp)
		covered = covered || cut
		parts = append(parts, rest...)
	}
	for i, p := range parts {
		var r []byte
		if i == 0 && !covered {
			r = st.s.replacement(h, v.inJSON)
		}
		st.insert(edit{p.start, p.end, r})
	}
	if st.onHit != nil {
		st.onHit(ScrubHit{ID: h.ID, Form: h.Form, Folded: v.folded, Passed: passed})
	}
}

// uncovered returns the parts of sp that no edit covers yet, and whether an
// edit covered some of it.
func (st *ScrubStream) uncovered(sp span) ([]span, bool) {
	var out []span
	cut := false
	at := sp.start
	for _, e := range st.edits {
		if e.end <= at || e.start >= sp.end {
			continue
		}
		cut = true
		if e.start > at {
			out = append(out, span{at, e.start})
		}
		at = max(at, e.end)
	}
	if at < sp.end {
		out = append(out, span{at, sp.end})
	}
	return out, cut
}

func (st *ScrubStream) insert(e edit) {
	i := len(st.edits)
	for i > 0 && st.edits[i-1].start > e.start {
		i--
	}
	st.edits = append(st.edits, edit{})
	copy(st.edits[i+1:], st.edits[i:])
	st.edits[i] = e
}

// release writes on the bytes before the first a view holds, with the
// edits in them.
func (st *ScrubStream) release(final bool) error {
	safe := st.base + int64(len(st.raw))
	if !final {
		safe = min(safe, st.contig.holdFrom(), st.lines.holdFrom(), st.json.holdFrom())
	}
	for _, e := range st.edits {
		if e.start < safe && e.end > safe {
			safe = e.start
		}
	}
	if safe <= st.base {
		return nil
	}
	at := st.base
	k := 0
	for ; k < len(st.edits) && st.edits[k].end <= safe; k++ {
		e := st.edits[k]
		if err := st.emit(st.raw[at-st.base : e.start-st.base]); err != nil {
			return err
		}
		if err := st.emit(e.repl); err != nil {
			return err
		}
		at = e.end
	}
	if err := st.emit(st.raw[at-st.base : safe-st.base]); err != nil {
		return err
	}
	st.edits = append(st.edits[:0], st.edits[k:]...)
	n := copy(st.raw, st.raw[safe-st.base:])
	st.raw = st.raw[:n]
	st.base = safe
	return nil
}

func (st *ScrubStream) emit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := st.w.Write(b)
	return err
}

// span is a range of the raw stream: [start, end).
