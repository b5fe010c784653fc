package secret

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
)

// Scrubber takes values out of a stream that is on its way to the guest
// (a response from a secret's own host, which was given the real value):
// every value is found in every form a Matcher knows, and also where the
// stream folds it —
//
//   - contiguous, as the bytes run (the contig view): the match is replaced
//     by the value's replacement in the same form, and no byte of it is
//     passed on before it is found;
//   - with whitespace taken out, and the escapes \n, \r and \t with it,
//     in any letter case (the lines view): "s k - a n t …", base64
//     wrapped at 76 columns, "SK-ANT-…", a header name lowercased;
//   - in JSON strings, escapes decoded and whitespace taken out, the
//     strings of one key path read as one text across values and
//     top-level documents (the JSON view): the characters of a value
//     streamed one per server-sent event, `\u0073k-…`.
//
// A match in a folded view is scattered over the bytes it came from: the
// first piece not yet passed on takes the replacement (JSON-escaped in a
// JSON string) and the other pieces are deleted, so that the text a client
// puts together holds the replacement where the value was. A folded view
// holds bytes back only once FoldedHold characters of a form are in
// progress (see FoldedHold), so that a stream of ordinary text is not held
// up; what went before is reported in ScrubHit.Passed.
//
// The folded views read text: a piece of the stream that reads as binary
// (binaryPiece) is scanned by the contig view alone, and breaks a folded
// match in progress.
//
// A Scrubber is immutable and safe for concurrent use; a ScrubStream
// scrubs one stream.
type Scrubber struct {
	contig, folded *Matcher
	repl           map[int][]byte // by needle id
	hold           int            // the folded views' FoldedHold, or less for short patterns
}

// FoldedHold is how many characters of a form a folded view must have seen
// in a row before it holds the stream back. Holding at every first
// character would hold a server-sent event whose text ends in an "s" until
// the next one (the first letter of "sk-ant-…"), which a model's streamed
// answer would feel at every such event; eight characters of a key's form
// in a row do not turn up in ordinary text. The cost: a value whose first
// characters arrive apart (one per event) may pass on its first seven
// characters of the form before the rest is held — for the provider keys
// capsem binds, a part of their public prefix (sk-ant-api03-, ghp_, sk-…).
const FoldedHold = 8

// MaxHeld bounds the bytes a ScrubStream holds back while a folded match is
// in progress: an upstream that spreads a value's characters over more
// than this (whitespace, padding events) gets ErrHeldTooLong.
const MaxHeld = 1 << 20

// ErrHeldTooLong ends a stream in which a folded match in progress held
// back more than MaxHeld bytes.
var ErrHeldTooLong = errors.New("secret: a possible value spread over more than 1 MiB of the stream; the stream was cut rather than passed on")

// ScrubNeedle is a value to take out of a stream and what takes its place.
type ScrubNeedle struct {
	ID          int
	Value       []byte
	Replacement []byte
}

// ScrubHit is a value found and replaced: which one, in what form, whether
// only a folded view saw it, and how many of its characters (in that view)
// had been passed on before it was found.
type ScrubHit struct {
	ID     int
	Form   Form
	Folded bool
	Passed int
}

// NewScrubber returns a Scrubber of needles, none shorter than MinNeedle.
func NewScrubber(needles []ScrubNeedle) (*Scrubber, error) {
	s := &Scrubber{repl: map[int][]byte{}, hold: FoldedHold}
	var contig, folded []Needle
	for _, n := range needles {
		contig = append(contig, Needle{ID: n.ID, Value: n.Value})
		if f := foldSpace(n.Value); len(f) >= MinNeedle {
			folded = append(folded, Needle{ID: n.ID, Value: f})
		}
		s.repl[n.ID] = bytes.Clone(n.Replacement)
	}
	var err error
	if s.contig, err = NewMatcher(contig); err != nil {
		return nil, err
	}
	if s.folded, err = newCaselessMatcher(folded); err != nil {
		return nil, err
	}
	if m := s.folded.MinLen(); m > 0 && m < s.hold {
		s.hold = m
	}
	return s, nil
}

// MinLen is the length of the shortest text a Scrubber can find: a shorter
// stream holds nothing to scrub.
func (s *Scrubber) MinLen() int {
	m := s.contig.MinLen()
	if f := s.folded.MinLen(); f > 0 && (m == 0 || f < m) {
		m = f
	}
	return m
}

// foldSpace returns v without ASCII whitespace and without the escapes
// \n, \r, \t: a value as the lines and JSON views see it.
func foldSpace(v []byte) []byte {
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if isSpace(c) {
			continue
		}
		if c == '\\' && i+1 < len(v) && isSpaceEscape(v[i+1]) {
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}

func isSpace(c byte) bool { return byteClass[c]&classSpace != 0 }

// byteClass says what the folds stop at, a table rather than comparisons:
// the folds look at every byte of a response from a secret's host, and
// the comparisons were half of their time (BenchmarkScrubStream).
var byteClass = func() (t [256]uint8) {
	for _, c := range " \t\n\r\f\v" {
		t[c] |= classSpace
	}
	for _, c := range `{}[]:,"` {
		t[c] |= classJSON
	}
	t['\\'] |= classSlash
	t['"'] |= classQuote
	for c := range 256 {
		if (c < 0x20 || c == 0x7f) && t[c]&classSpace == 0 {
			t[c] |= classControl
		}
	}
	return t
}()

const (
	classSpace   = 1 << iota
	classJSON    // a byte JSON structure is made of, outside strings
	classSlash   // a backslash
	classQuote   // a double quote
	classControl // a control character other than whitespace: binary
)

// classControlShift brings classControl down to 1.
const classControlShift = 4

// isSpaceEscape: the letter of a backslash escape that stands for
// whitespace (or a control character) in JSON and most string syntaxes.
func isSpaceEscape(c byte) bool { return c == 'n' || c == 'r' || c == 't' || c == 'f' || c == 'b' }

// replacement is what takes the place of needle h.ID found as h says: the
// replacement written in the same form — in base64 at the same alignment,
// so that the text after it still decodes (when the replacement's length
// is the value's, modulo 3) — escaped for a JSON string when it goes into
// one.
func (s *Scrubber) replacement(h Hit, inJSON bool) []byte {
	r := s.repl[h.ID]
	switch h.Form {
	case FormPercent:
		r = []byte(PercentEncode(string(r), true))
	case FormBase64, FormBase64URL:
		r = []byte(Base64Window(h.Form, r, h.Align))
	case FormHex:
		r = []byte(hex.EncodeToString(r))
	}
	if inJSON {
		var b []byte
		for _, c := range r {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, `\u00`...)
				b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			default:
				b = append(b, c)
			}
		}
		r = b
	}
	return r
}

// ScrubString scrubs a whole value (a header field): the value with every
// match replaced, and the hits.
func (s *Scrubber) ScrubString(v string) (string, []ScrubHit) {
	if len(v) < s.MinLen() || s.MinLen() == 0 {
		return v, nil
	}
	var out bytes.Buffer
	var hits []ScrubHit
	st := s.Stream(&out, func(h ScrubHit) { hits = append(hits, h) })
	st.Write([]byte(v))
	st.Close()
	if len(hits) == 0 {
		return v, nil
	}
	return out.String(), hits
}

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
type span struct{ start, end int64 }

// view is one way of reading the stream: the bytes it reads (a fold of the
// raw bytes) go through a matcher's Stream, and runs map them back to the
// raw bytes they came from, for the bytes a match may still use.
type view struct {
	m       *Matcher
	st      *Stream
	stBase  int64 // the view offset st started at
	norm    int64 // view bytes given to st
	minHold int   // a match in progress holds the stream once this long
	ident   bool  // view offset = raw offset (the contig view): no runs
	folded  bool
	inJSON  bool
	runs    []run  // cover the view bytes from st's Safe point on
	pend    []byte // view bytes not given to st yet
	lower   bool   // the view reads letters in lower case (the folded views)
}

// run maps n view bytes from norm to the raw stream: byte by byte from raw
// on, or (unit) all of them to the w raw bytes of one escape.
type run struct {
	norm, raw int64
	n, w      int32
	unit      bool
}

// add appends view bytes b, which are the raw bytes from raw on.
func (v *view) add(b []byte, raw int64) {
	at := v.norm + int64(len(v.pend))
	if k := len(v.runs) - 1; k >= 0 {
		r := &v.runs[k]
		if !r.unit && r.norm+int64(r.n) == at && r.raw+int64(r.n) == raw {
			r.n += int32(len(b))
			r.w = r.n
			v.appendPend(b)
			return
		}
	}
	v.runs = append(v.runs, run{norm: at, raw: raw, n: int32(len(b)), w: int32(len(b))})
	v.appendPend(b)
}

func (v *view) appendPend(b []byte) {
	if !v.lower {
		v.pend = append(v.pend, b...)
		return
	}
	for _, c := range b {
		v.pend = append(v.pend, lowerByte[c])
	}
}

// lowerByte is the ASCII lower case of a byte (others unchanged).
var lowerByte = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

// addUnit appends view bytes b that all come from the w raw bytes at raw
// (an escape).
func (v *view) addUnit(b []byte, raw int64, w int) {
	at := v.norm + int64(len(v.pend))
	v.runs = append(v.runs, run{norm: at, raw: raw, n: int32(len(b)), w: int32(w), unit: true})
	v.appendPend(b)
}

// commitIdent scans p, the raw bytes from at on, in the contig view.
func (v *view) commitIdent(p []byte, at int64, hit func(*view, Hit, int64)) {
	v.scan(p, at, hit)
}

// commit scans the pending view bytes.
func (v *view) commit(hit func(*view, Hit, int64)) {
	if len(v.pend) == 0 {
		return
	}
	v.scan(v.pend, v.norm, hit)
	v.pend = v.pend[:0]
	v.trim()
}

// scan gives data (the view bytes from at on) to the matcher's stream; a
// hit is handed on and the stream starts again after it.
func (v *view) scan(data []byte, at int64, hit func(*view, Hit, int64)) {
	end := at + int64(len(data))
	for len(data) > 0 {
		h, ok := v.st.Write(data)
		if !ok {
			break
		}
		hs := v.stBase + h.Offset
		he := hs + int64(h.Len)
		hit(v, h, hs)
		v.st, v.stBase = v.m.Stream(), max(he, at)
		data = data[max(he, at)-at:]
		at = max(he, at)
	}
	v.norm = end
}

// trim drops the runs of view bytes no match can use any more.
func (v *view) trim() {
	safe := v.stBase + v.st.Safe()
	k := 0
	for k < len(v.runs) && v.runs[k].norm+int64(v.runs[k].n) <= safe {
		k++
	}
	if k > 0 {
		v.runs = append(v.runs[:0], v.runs[k:]...)
	}
}

// spans returns the raw spans view bytes [a, b) came from.
func (v *view) spans(a, b int64) []span {
	if v.ident {
		return []span{{a, b}}
	}
	var out []span
	for _, r := range v.runs {
		re := r.norm + int64(r.n)
		if re <= a || r.norm >= b {
			continue
		}
		sp := span{r.raw, r.raw + int64(r.w)}
		if !r.unit {
			sp = span{r.raw + max(a, r.norm) - r.norm, r.raw + min(b, re) - r.norm}
		}
		if k := len(out) - 1; k >= 0 && out[k].end >= sp.start {
			out[k].end = max(out[k].end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// passed is how many of view bytes [a, b) had gone on before the match
// was found: those whose raw bytes start before base.
func (v *view) passed(a, b, base int64) int {
	if v.ident {
		return int(max(0, min(b, base)-a))
	}
	n := int64(0)
	for _, r := range v.runs {
		re := r.norm + int64(r.n)
		if re <= a || r.norm >= b {
			continue
		}
		lo, hi := max(a, r.norm), min(b, re)
		switch {
		case r.unit:
			if r.raw < base { // an escape of which a byte went
				n += hi - lo
			}
		default:
			n += min(hi-lo, max(0, base-(r.raw+lo-r.norm)))
		}
	}
	return int(n)
}

// restart drops a match in progress: what follows cannot continue it.
func (v *view) restart() {
	v.st, v.stBase = v.m.Stream(), v.norm
	v.runs = v.runs[:0]
}

// holdFrom is the raw offset from which the view holds the stream back (a
// match in progress at least minHold long starts there), MaxInt64 when it
// holds nothing.
func (v *view) holdFrom() int64 {
	safe := v.stBase + v.st.Safe()
	if v.norm-safe < int64(v.minHold) {
		return math.MaxInt64
	}
	if v.ident {
		return safe
	}
	for _, r := range v.runs {
		if r.norm+int64(r.n) > safe {
			if r.unit || safe < r.norm {
				return r.raw
			}
			return r.raw + safe - r.norm
		}
	}
	return math.MaxInt64
}

// lineFold feeds the lines view: the raw bytes without whitespace and
// without the escapes \n, \r, \t, \f, \b.
type lineFold struct {
	v       *view
	slash   bool // a backslash ended the last write
	slashAt int64
}

func (f *lineFold) feed(p []byte, at int64) {
	i := 0
	if f.slash && len(p) > 0 {
		f.slash = false
		if isSpaceEscape(p[0]) {
			i = 1
		} else {
			f.v.add([]byte{'\\'}, f.slashAt)
		}
	}
	for i < len(p) {
		c := p[i]
		switch {
		case isSpace(c):
			i++
		case c == '\\':
			if i+1 == len(p) {
				f.slash, f.slashAt = true, at+int64(i)
				i++
			} else if isSpaceEscape(p[i+1]) {
				i += 2
			} else {
				f.v.add(p[i:i+1], at+int64(i))
				i++
			}
		default:
			j := i + 1
			for j < len(p) && byteClass[p[j]]&(classSpace|classSlash) == 0 {
				j++
			}
			f.v.add(p[i:j], at+int64(i))
			i = j
		}
	}
}

func (f *lineFold) close(hit func(*view, Hit, int64)) {
	if f.slash {
		f.slash = false
		f.v.add([]byte{'\\'}, f.slashAt)
	}
	f.v.commit(hit)
}
