package secret

import (
	"bytes"
	"encoding/hex"
	"errors"
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
