package dlp

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// A Match is one detection: the detector's name, the stream offset of the
// match's first byte, and the matched text (at most MaxValue bytes of it),
// for the caller to compare with the values it exempts. Value is a
// secret: it must never be logged or stored.
type Match struct {
	Detector string
	Offset   int64
	Value    []byte
}

// A Scanner finds the secrets of a set of detectors in text. It is
// immutable: its ScanString and its Streams may be used concurrently.
type Scanner struct {
	on    [nDetectors]bool
	rules [256][]*tokenRule // by first byte, in tokenRules' order
	first [256]bool         // a token rule or a JWT starts with the byte
	runs  bool              // some detector other than private-key is on

	// The rules taken anywhere (tokenRule.anywhere), glued to a word
	// before them: by the byte of the prefix the scanner stops at (sep),
	// and those that end where a stretch of letters and digits does.
	glued    []*tokenRule
	bySep    [256][]sepRule
	byEnd    []*tokenRule
	endLen   int       // the length of a match of each of byEnd (all are AWS key ids)
	endFirst [256]bool // the first bytes of byEnd's prefixes
	gluedTo  int       // how far before the end of a write a glued match may start undecided: the longest prefix, or prefix and tail of an exact one
}

// NewScanner returns a scanner for the named detectors (nil or empty: all
// of them). An unknown name is an error that lists the known ones.
func NewScanner(detectors []string) (*Scanner, error) {
	s := &Scanner{}
	if len(detectors) == 0 {
		detectors = detectorNames[:]
	}
	for _, name := range detectors {
		d := slices.Index(detectorNames[:], name)
		if d < 0 {
			return nil, fmt.Errorf("dlp: unknown detector %q (known: %s)", name, strings.Join(detectorNames[:], ", "))
		}
		s.on[d] = true
	}
	for i := range tokenRules {
		if r := &tokenRules[i]; s.on[r.det] {
			s.rules[r.prefix[0]] = append(s.rules[r.prefix[0]], r)
			s.first[r.prefix[0]] = true
		}
	}
	for i := range tokenRules {
		r := &tokenRules[i]
		if !s.on[r.det] || !r.anywhere {
			continue
		}
		s.glued = append(s.glued, r)
		if k := r.sep(); k >= 0 {
			s.bySep[r.prefix[k]] = append(s.bySep[r.prefix[k]], sepRule{r, k})
			s.gluedTo = max(s.gluedTo, len(r.prefix))
		} else {
			if s.endLen != 0 && s.endLen != len(r.prefix)+r.min {
				// TestDetectorNames keeps tokenRules from this.
				return nil, fmt.Errorf("dlp: the rules taken anywhere without a separator differ in length (%s)", r.prefix)
			}
			s.byEnd, s.endLen = append(s.byEnd, r), len(r.prefix)+r.min
			s.endFirst[r.prefix[0]] = true
			s.gluedTo = max(s.gluedTo, s.endLen)
		}
	}
	if s.on[dJWT] {
		s.first['e'] = true
	}
	for d, on := range s.on {
		s.runs = s.runs || on && d != dPrivateKey
	}
	return s, nil
}

var all, _ = NewScanner(nil)

// ScanString returns the matches in v, a whole text (a header value, a
// URL), in the order of their offsets.
func (s *Scanner) ScanString(v string) []Match {
	b := []byte(v)
	ms, _ := s.scan(window{b: b, final: true, cap: MaxValue}, 0, 0, len(b))
	return ms
}

// scan returns the matches that start in [from, limit) of w.b, whose first
// byte is at stream offset base, and the frontier: the first position not
// decided (limit when all are). The matches are those that start before
// the frontier, by offset. b[0] is the start of the stream or from > 0:
// the byte before a position is always there to look at, and so are the
// awsContext bytes before from, if the stream has them.
func (s *Scanner) scan(w window, base int64, from, limit int) ([]Match, int) {
	b := w.b
	n := len(b)
	var ms []Match
	add := func(d, i, end int) {
		ms = append(ms, Match{Detector: detectorNames[d], Offset: base + int64(i), Value: bytes.Clone(b[i:end])})
	}
	// stop lowers limit to a position whose verdict needs more bytes:
	// nothing at or after it is decided.
	stop := func(i int) {
		limit = min(limit, i)
	}

	if s.on[dPrivateKey] {
		// A PEM header holds spaces: it is not in a run. '-' is rare
		// enough for bytes.Index, which skips with IndexByte.
		for i := from; i < limit; {
			k := bytes.Index(b[i:min(n, limit+len(pemBegin)-1)], []byte(pemBegin))
			if k < 0 {
				if !w.final {
					// A pemBegin cut off by the end of b.
					for j := max(i, n-len(pemBegin)+1); j < min(n, limit); j++ {
						if bytes.HasPrefix([]byte(pemBegin), b[j:]) {
							stop(j)
							break
						}
					}
				}
				break
			}
			i += k
			end, v := w.pem(i)
			switch v {
			case yes:
				add(dPrivateKey, i, end)
			case more:
				stop(i)
			}
			i++
		}
	}

	if s.runs {
		// Every other match starts with minRun bytes of class cRun: look
		// at the last byte of a window of minRun; if it is not of the
		// class, no match starts in the window. If it is, walk back to
		// the first that is not and start the next window after it.
		// On random bytes (a quarter of which are of the class) this
		// looks at about one byte in fifteen: 3.4-3.7 GB/s in 256 KiB
		// writes (BenchmarkStream/random).
		i := from
		for i < limit && i+minRun <= n {
			p := i + minRun - 1
			if cls[b[p]]&cRun == 0 {
				i = p + 1
				continue
			}
			q := p - 1
			for q >= i && cls[b[q]]&cRun != 0 {
				q--
			}
			if q >= i {
				i = q + 1
				continue
			}
			var e int
			e, limit = s.run(&w, i, limit, add)
			i = e + 1
		}
		if !w.final && i < limit {
			// Fewer than minRun bytes are left: a match may start in
			// them when more come.
			stop(i)
		}
	}

	ms = slices.DeleteFunc(ms, func(m Match) bool { return m.Offset >= base+int64(limit) })
	slices.SortStableFunc(ms, func(x, y Match) int {
		if x.Offset != y.Offset {
			if x.Offset < y.Offset {
				return -1
			}
			return 1
		}
		return slices.Index(detectorNames[:], x.Detector) - slices.Index(detectorNames[:], y.Detector)
	})
	return ms, limit
}

// run looks for matches that start in the run of class cRun bytes that
// starts at a (with minRun of them at least) and before limit: tokens at
// word boundaries, and AWS secret keys, the 40-byte stretches of class cV
// in it. It returns the end of the run (or where it stopped, at limit)
// and limit, lowered to a position whose verdict needs more bytes.
//
// It stops only at the bytes that are not letters or digits: in base64
// text one byte in 32 (BenchmarkStream/base64: 1.1-1.2 GB/s, from 0.35
// GB/s when it looked at every byte's class bits; unrolling the loop by
// eight made it slower, 0.7-0.8 GB/s).
func (s *Scanner) run(w *window, a, limit int, add func(d, i, end int)) (int, int) {
	b := w.b
	n := len(b)
	vs := a // the start of the stretch of class cV being walked
	cand := a == 0 || cls[b[a-1]]&cWord == 0
	i := a
	for {
		if cand && i < limit && i < n && s.first[b[i]] {
			d, end, v := s.tokenAt(w, i)
			switch v {
			case yes:
				add(d, i, end)
			case more:
				limit = i
			}
		}
		j := i
		for j < n && cls[b[j]]&cAlnum != 0 {
			j++
		}
		if j == n {
			break
		}
		if s.glued != nil && (len(s.bySep[b[j]]) > 0 || j-s.endLen >= i && s.endFirst[b[j-s.endLen]]) {
			limit = s.gluedAt(w, a, i, j, limit, add)
		}
		c := cls[b[j]]
		if c&cRun == 0 {
			limit = s.secretAt(w, vs, j, limit, add)
			return j, limit
		}
		if c&cV == 0 { // '_' or '-'
			limit = s.secretAt(w, vs, j, limit, add)
			vs = j + 1
		}
		cand = c&cWord == 0
		i = j + 1
		// A glued match is decided at the end of the stretch it starts
		// in (gluedAt, above): one that starts before limit is decided.
		if i >= limit && vs >= limit {
			return i, limit
		}
	}
	// The run reaches the end of b.
	if w.final {
		limit = s.secretAt(w, vs, n, limit, add)
		if s.glued != nil {
			limit = s.gluedAt(w, a, i, n, limit, add)
		}
	} else {
		if n-vs <= awsSecretLen && vs < limit && s.on[dAWSSecretKey] && (vs == 0 || cls[b[vs-1]]&cV == 0) {
			limit = vs // the stretch may yet be 40 bytes long
		}
		if s.glued != nil {
			limit = s.holdGlued(w, a, limit)
		}
	}
	return n, limit
}

// glue reports whether a match at i would be glued to a word before it:
// only the rules taken anywhere are tried there (at a word boundary,
// run tries them all).
func glue(b []byte, i int) bool { return i > 0 && cls[b[i-1]]&cWord != 0 }

// gluedAt tries the rules taken anywhere at the glued positions the
// stretch of letters and digits [i, j) of the run that starts at a
// decides: where a prefix with a separator has it at j (a byte of the run
// that is no letter or digit), and where an exact rule's match without
// one ends at j. It returns limit, lowered to a position whose verdict
// needs more bytes.
func (s *Scanner) gluedAt(w *window, a, i, j, limit int, add func(d, i, end int)) int {
	b := w.b
	try := func(st int, r *tokenRule) {
		if st < i || st < a || st >= limit || b[st] != r.prefix[0] || !glue(b, st) {
			return
		}
		switch end, v := w.token(st, r); v {
		case yes:
			add(r.det, st, end)
		case more:
			limit = st
		}
	}
	for _, r := range s.byEnd {
		try(j-s.endLen, r)
	}
	if j < len(b) {
		for _, sr := range s.bySep[b[j]] {
			try(j-sr.sep, sr.tokenRule)
		}
	}
	return limit
}

// holdGlued lowers limit to the first glued position within gluedTo of
// the end of b (a run that reaches it) where a rule taken anywhere needs
// more bytes for its verdict: "…xgh" may yet be "xghp_…", and an exact
// match ending at the end of b may yet be followed by more of its tail.
func (s *Scanner) holdGlued(w *window, a, limit int) int {
	b := w.b
	for st := max(a, len(b)-s.gluedTo); st < min(len(b), limit); st++ {
		if !glue(b, st) {
			continue
		}
		for _, r := range s.glued {
			if b[st] != r.prefix[0] {
				continue
			}
			if _, v := w.token(st, r); v == more {
				return st
			}
		}
	}
	return limit
}

// secretAt checks the stretch [vs, ve) of class cV bytes, ended by a byte
// of another class or the end of the stream, for an AWS secret key.
func (s *Scanner) secretAt(w *window, vs, ve, limit int, add func(d, i, end int)) int {
	if !s.on[dAWSSecretKey] || ve-vs != awsSecretLen || vs >= limit {
		return limit
	}
	if vs > 0 && cls[w.b[vs-1]]&cV != 0 {
		return limit
	}
	if w.awsSecret(vs) {
		add(dAWSSecretKey, vs, ve)
	}
	return limit
}

// tokenAt tries the token rules and the JWT at i: the first whose verdict
// is not no gives the detector, the match's end and the verdict.
func (s *Scanner) tokenAt(w *window, i int) (int, int, verdict) {
	for _, r := range s.rules[w.b[i]] {
		if end, v := w.token(i, r); v != no {
			return r.det, end, v
		}
	}
	if w.b[i] == 'e' && s.on[dJWT] {
		if v := w.literal(i, "eyJ"); v != yes {
			return dJWT, 0, v
		}
		end, v := w.jwt(i)
		return dJWT, end, v
	}
	return 0, 0, no
}

// A sepRule is a rule taken anywhere and the index of its prefix's
// separator.
type sepRule struct {
	*tokenRule
	sep int
}

// A Stream scans one stream that arrives in writes of any size: it finds
// what ScanString finds in the whole stream, each match once, as soon as
// the bytes that decide it have been written.
type Stream struct {
	s      *Scanner
	buf    []byte // context, then the bytes not yet decided
	base   int64  // the stream offset of buf[0]
	next   int    // the frontier, in buf: positions before it are decided
	closed bool
}

// Stream returns a new stream to scan.
func (s *Scanner) Stream() *Stream { return &Stream{s: s} }

// keep is how much of the stream before the frontier a Stream holds: what
// the detectors look at before a match's start.
const keep = awsContext

// head is how much of a large write is first scanned with the bytes held
// back: enough for the verdict on every position in them but a JWT's.
const head = 1024

// Write scans p, the next bytes of the stream, and returns the matches it
// completes, by offset. It does not keep p.
func (st *Stream) Write(p []byte) []Match {
	if st.closed || len(p) == 0 {
		return nil
	}
	w := window{final: false, cap: MaxValue}
	if len(p) < 2*head {
		st.buf = append(st.buf, p...)
		w.b = st.buf
		ms, f := st.s.scan(w, st.base, st.next, len(st.buf))
		st.next = f
		st.trim()
		return ms
	}
	// A large write is scanned where it is, not copied: first the bytes
	// held back with the head of p, far enough into p that every
	// position in p scanned then has keep bytes of p before it.
	held := len(st.buf)
	st.buf = append(st.buf, p[:head]...)
	w.b = st.buf
	ms, f := st.s.scan(w, st.base, st.next, held+keep)
	if f < held+keep {
		// A verdict needs more than the head (a long JWT): scan on in
		// a copy.
		st.buf = append(st.buf, p[head:]...)
		w.b = st.buf
		rest, f := st.s.scan(w, st.base, f, len(st.buf))
		st.next = f
		st.trim()
		return append(ms, rest...)
	}
	pbase := st.base + int64(held)
	w.b = p
	rest, f := st.s.scan(w, pbase, keep, len(p))
	st.buf = append(st.buf[:0], p[f-keep:]...)
	st.base = pbase + int64(f-keep)
	st.next = keep
	return append(ms, rest...)
}

// trim drops what is before the frontier but the keep bytes before it.
func (st *Stream) trim() {
	if cut := st.next - keep; cut > 0 {
		n := copy(st.buf, st.buf[cut:])
		st.buf = st.buf[:n]
		st.base += int64(cut)
		st.next = keep
	}
}

// Safe returns the stream offset before which no match can start any
// more: the bytes before it are final, those after it may yet turn out to
// start a match (a caller that must refuse a request before it forwards a
// secret holds them back). It is at most MaxValue bytes behind the end of
// what was written but after a JWT's start, which may hold it up to
// 8 KiB.
func (st *Stream) Safe() int64 { return st.base + int64(st.next) }

// Close ends the stream and returns the matches that only its end
// completes. A Stream is not used after Close.
func (st *Stream) Close() []Match {
	if st.closed {
		return nil
	}
	st.closed = true
	ms, _ := st.s.scan(window{b: st.buf, final: true, cap: MaxValue}, st.base, st.next, len(st.buf))
	st.buf = nil
	st.next = 0
	return ms
}

// scanAll returns the matches in s, whole: not cut at MaxValue.
func (s *Scanner) scanAll(v string) []Match {
	b := []byte(v)
	ms, _ := s.scan(window{b: b, final: true, cap: max(len(b), MaxValue)}, 0, 0, len(b))
	return ms
}
