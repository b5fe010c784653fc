package secret

import "math"

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
