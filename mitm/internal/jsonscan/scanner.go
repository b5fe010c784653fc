package jsonscan

import (
	"bytes"
	"unicode/utf8"
)

// Kind is the kind of token a handler is called for.
type Kind uint8

const (
	ObjStart Kind = iota // before the object's members; Capture may be called
	ObjEnd               // after the object; Captured holds it if captured
	ArrStart             // before the array's elements; Capture may be called
	ArrEnd               // after the array; Captured holds it if captured
	StrStart             // the opening quote of a string value; Keep may be called
	String               // a string value: Str (at most the kept bytes), StrTruncated
	Number               // Num holds the literal
	True
	False
	Null
)

// The fixed limits: nesting deeper than MaxDepth stops the scan; a key is
// kept up to MaxKeyBytes (a longer one is cut, and may then equal another),
// a number literal up to MaxNumberBytes.
const (
	MaxDepth       = 256
	MaxKeyBytes    = 256
	MaxNumberBytes = 64
)

type scanState uint8

const (
	stValue         scanState = iota // a value must come
	stValueOrArrEnd                  // after '['
	stKeyOrObjEnd                    // after '{'
	stKey                            // after ',' in an object
	stColon                          // after a key
	stAfterValue                     // ',' or the container's end (or, at the top, another value)
	stString
	stEscape
	stUnicode
	stNumber
	stLiteral
	stError
)

type frame struct {
	arr   bool
	index int    // arrays: the current element, -1 before the first
	key   []byte // objects: the current member's key (capped)
}

// Scanner is a push-style JSON tokenizer; see the package documentation. It
// is not safe for concurrent use.
type Scanner struct {
	handle func(s *Scanner, k Kind)

	stack []frame
	state scanState
	// After a string, number or literal: the state to go on with.
	inKey bool

	str      []byte
	strMax   int // bytes of the current string value kept
	strLen   int // bytes of the current string value seen (decoded)
	strTrunc bool
	defMax   int // strMax at the start of each string
	uHex     int // hex digits of a \u escape read so far
	uVal     rune
	hiSurr   rune // a high surrogate waiting for its pair

	num []byte

	lit    string // the rest of true/false/null expected
	litTok Kind

	capDepth int // stack depth of the captured value; -1 when not capturing
	capMax   int
	capBuf   []byte
	capTrunc bool
	capDone  bool // captured() is valid (during the end callback)

	camelKeys   bool // rewrite snake_case keys to lowerCamelCase (protobuf JSON)
	pendingOpen byte // '{' or '[' while its start is being reported

	failed bool
	off    int64 // bytes consumed since New or Reset
}

// New returns a scanner that calls h for each token, from within Write and
// Close. A string value is kept up to defStringBytes unless the StrStart
// callback says otherwise with Keep.
func New(defStringBytes int, h func(s *Scanner, k Kind)) *Scanner {
	return &Scanner{handle: h, defMax: defStringBytes, capDepth: -1}
}

// Keep sets how many bytes of the current string value to keep. It is
// meant to be called from the StrStart callback.
func (s *Scanner) Keep(n int) { s.strMax = n }

// Capture starts capturing the object or array whose start is being
// reported, as compact JSON of at most max bytes.
func (s *Scanner) Capture(max int) {
	if s.capDepth >= 0 || len(s.stack) >= MaxDepth {
		return
	}
	s.capDepth = len(s.stack)
	s.capMax = max
	s.capBuf = s.capBuf[:0]
	s.capTrunc = false
	s.capDone = false
	s.appendCap(s.openByte())
}

// Captured returns the captured value and whether it was cut at the cap. It
// is valid in the ObjEnd or ArrEnd callback of the captured value.
func (s *Scanner) Captured() ([]byte, bool) {
	if !s.capDone {
		return nil, false
	}
	return s.capBuf, s.capTrunc
}

// openByte is used by Capture: which bracket the value being started opens.
// Capture is only called from a ObjStart or ArrStart callback, where
// pending records it.
func (s *Scanner) openByte() byte { return s.pendingOpen }

// Depth is the length of the path to the current token.
func (s *Scanner) Depth() int { return len(s.stack) }

// At reports whether the path to the current token, from depth base on, is
// pat (matched as in HasPrefix).
func (s *Scanner) At(base int, pat ...string) bool {
	return len(s.stack) == base+len(pat) && s.HasPrefix(base, pat...)
}

// HasPrefix reports whether the path to the current token, from depth base
// on, starts with pat: "#" matches any array index, any other string an
// object key.
func (s *Scanner) HasPrefix(base int, pat ...string) bool {
	if len(s.stack) < base+len(pat) {
		return false
	}
	for i, p := range pat {
		f := &s.stack[base+i]
		if p == "#" {
			if !f.arr {
				return false
			}
			continue
		}
		if f.arr || string(f.key) != p {
			return false
		}
	}
	return true
}

// SetString stores the string being reported in *dst; any other token
// leaves it as it is.
func (s *Scanner) SetString(k Kind, dst *string) {
	if k == String {
		*dst = string(s.str)
	}
}

// Index returns the array index at depth i of the path, or -1.
func (s *Scanner) Index(i int) int {
	if i < 0 || i >= len(s.stack) || !s.stack[i].arr {
		return -1
	}
	return s.stack[i].index
}

// Key returns the object key at depth i of the path (at most MaxKeyBytes),
// or nil where the path is in an array there. The bytes are valid until the
// next token.
func (s *Scanner) Key(i int) []byte {
	if i < 0 || i >= len(s.stack) || s.stack[i].arr {
		return nil
	}
	return s.stack[i].key
}

// Str returns the string value being reported (String): at most the bytes
// kept, cut at a whole UTF-8 sequence. The bytes are valid until the next
// token.
func (s *Scanner) Str() []byte { return s.str }

// StrTruncated reports whether the string value being reported was longer
// than the bytes kept.
func (s *Scanner) StrTruncated() bool { return s.strTrunc }

// StrLen returns the decoded length of the string value being reported,
// kept or not.
func (s *Scanner) StrLen() int { return s.strLen }

// Num returns the number literal being reported (Number), at most
// MaxNumberBytes of it. The bytes are valid until the next token.
func (s *Scanner) Num() []byte { return s.num }

// Offset returns the bytes consumed since New or the last Reset, through
// the byte that completed the current token: in an ObjStart or ArrStart
// callback its bracket is the byte at Offset()-1, in an ObjEnd or ArrEnd
// callback the closing one. (A number ends at the byte after it, or at
// Close.) A failed scan consumes no more.
func (s *Scanner) Offset() int64 { return s.off }

// Failed reports whether the scan stopped: a syntax error, or nesting
// deeper than MaxDepth. Reset starts it again.
func (s *Scanner) Failed() bool { return s.failed }

// CamelKeys makes the scanner rewrite snake_case keys to lowerCamelCase, as
// protobuf's JSON mapping accepts both ("system_instruction" is
// "systemInstruction").
func (s *Scanner) CamelKeys(on bool) { s.camelKeys = on }

func (s *Scanner) appendCap(c byte) {
	if len(s.capBuf) < s.capMax {
		s.capBuf = append(s.capBuf, c)
	} else {
		s.capTrunc = true
	}
}

func (s *Scanner) appendCapBytes(b []byte) {
	room := s.capMax - len(s.capBuf)
	if len(b) > room {
		b = b[:max(room, 0)]
		s.capTrunc = true
	}
	s.capBuf = append(s.capBuf, b...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Write feeds bytes; it always accepts them all.
func (s *Scanner) Write(b []byte) (int, error) {
	n := len(b)
	for i := 0; i < len(b) && !s.failed; {
		if s.state == stString {
			i += s.scanString(b[i:])
			continue
		}
		c := b[i]
		i++
		s.off++
		if s.capDepth >= 0 && !isSpace(c) {
			s.appendCap(c)
		}
		s.step(c)
	}
	return n, nil
}

// Close ends the input: a number at the top level is complete.
func (s *Scanner) Close() {
	if s.state == stNumber && !s.failed {
		s.endNumber()
	}
}

func (s *Scanner) fail() {
	s.failed = true
	s.state = stError
}

// scanString consumes string bytes up to the next quote, backslash or control
// byte (handled by step) and returns how many it consumed.
func (s *Scanner) scanString(b []byte) int {
	end := len(b)
	if q := bytes.IndexByte(b, '"'); q >= 0 {
		end = q
	}
	if e := bytes.IndexByte(b[:end], '\\'); e >= 0 {
		end = e
	}
	if end == 0 {
		c := b[0]
		s.off++
		if s.capDepth >= 0 {
			s.appendCap(c)
		}
		s.step(c)
		return 1
	}
	chunk := b[:end]
	s.off += int64(end)
	if s.capDepth >= 0 {
		s.appendCapBytes(chunk)
	}
	if s.hiSurr != 0 {
		s.addRune(utf8.RuneError)
		s.hiSurr = 0
	}
	s.addBytes(chunk)
	return end
}

func (s *Scanner) strCap() int {
	if s.inKey {
		return MaxKeyBytes
	}
	return s.strMax
}

func (s *Scanner) addBytes(b []byte) {
	s.strLen += len(b)
	if s.strTrunc {
		return
	}
	room := s.strCap() - len(s.str)
	if len(b) > room {
		// Keep what fits, without a partial UTF-8 sequence at the end.
		s.str = CutRune(append(s.str, b[:max(room, 0)]...))
		s.strTrunc = true
		return
	}
	s.str = append(s.str, b...)
}

func (s *Scanner) addRune(r rune) {
	var buf [4]byte
	n := utf8.EncodeRune(buf[:], r)
	s.addBytes(buf[:n])
}

// startValue handles the first byte of a value.
func (s *Scanner) startValue(c byte) {
	if len(s.stack) > 0 {
		if top := &s.stack[len(s.stack)-1]; top.arr {
			top.index++
		}
	}
	switch c {
	case '{', '[':
		if len(s.stack) >= MaxDepth {
			s.fail()
			return
		}
		s.pendingOpen = c
		if c == '{' {
			s.handle(s, ObjStart)
		} else {
			s.handle(s, ArrStart)
		}
		s.push(c == '[')
		if c == '{' {
			s.state = stKeyOrObjEnd
		} else {
			s.state = stValueOrArrEnd
		}
	case '"':
		s.inKey = false
		s.str = s.str[:0]
		s.strLen = 0
		s.strTrunc = false
		s.strMax = s.defMax
		s.handle(s, StrStart)
		s.state = stString
	case 't':
		s.lit, s.litTok, s.state = "rue", True, stLiteral
	case 'f':
		s.lit, s.litTok, s.state = "alse", False, stLiteral
	case 'n':
		s.lit, s.litTok, s.state = "ull", Null, stLiteral
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			s.num = append(s.num[:0], c)
			s.state = stNumber
			return
		}
		s.fail()
	}
}

func (s *Scanner) push(arr bool) {
	if len(s.stack) < cap(s.stack) {
		s.stack = s.stack[:len(s.stack)+1]
		f := &s.stack[len(s.stack)-1]
		f.arr, f.index, f.key = arr, -1, f.key[:0]
		return
	}
	s.stack = append(s.stack, frame{arr: arr, index: -1})
}

// pop ends the innermost container and reports it.
func (s *Scanner) pop(arr bool) {
	if len(s.stack) == 0 || s.stack[len(s.stack)-1].arr != arr {
		s.fail()
		return
	}
	s.stack = s.stack[:len(s.stack)-1]
	ending := s.capDepth >= 0 && s.capDepth == len(s.stack)
	if ending {
		s.capDone = true
	}
	if arr {
		s.handle(s, ArrEnd)
	} else {
		s.handle(s, ObjEnd)
	}
	if ending {
		s.capDepth = -1
		s.capDone = false
	}
	s.state = stAfterValue
}

func (s *Scanner) endNumber() {
	s.state = stAfterValue
	s.handle(s, Number)
}

func (s *Scanner) endString() {
	if s.hiSurr != 0 {
		s.addRune(utf8.RuneError)
		s.hiSurr = 0
	}
	s.state = stAfterValue
	if s.inKey {
		top := &s.stack[len(s.stack)-1]
		top.key = append(top.key[:0], s.str...)
		if s.camelKeys {
			top.key = camel(top.key)
		}
		s.inKey = false
		s.state = stColon
		return
	}
	s.handle(s, String)
}

func (s *Scanner) step(c byte) {
	switch s.state {
	case stValue:
		if !isSpace(c) {
			s.startValue(c)
		}
	case stValueOrArrEnd:
		switch {
		case isSpace(c):
		case c == ']':
			s.pop(true)
		default:
			s.startValue(c)
		}
	case stKeyOrObjEnd, stKey:
		switch {
		case isSpace(c):
		case c == '}' && s.state == stKeyOrObjEnd:
			s.pop(false)
		case c == '"':
			s.inKey = true
			s.str = s.str[:0]
			s.strLen = 0
			s.strTrunc = false
			s.state = stString
		default:
			s.fail()
		}
	case stColon:
		switch {
		case isSpace(c):
		case c == ':':
			s.state = stValue
		default:
			s.fail()
		}
	case stAfterValue:
		if isSpace(c) {
			return
		}
		if len(s.stack) == 0 {
			s.startValue(c) // another top-level value
			return
		}
		top := &s.stack[len(s.stack)-1]
		switch {
		case c == ',' && top.arr:
			s.state = stValue
		case c == ',':
			s.state = stKey
		case c == ']' && top.arr, c == '}' && !top.arr:
			s.pop(top.arr)
		default:
			s.fail()
		}
	case stString:
		switch {
		case c == '"':
			s.endString()
		case c == '\\':
			s.state = stEscape
		default: // a control byte: tolerated, kept as is
			s.addRune(rune(c))
		}
	case stEscape:
		s.state = stString
		var r rune
		switch c {
		case 'u':
			s.uHex, s.uVal = 0, 0
			s.state = stUnicode
			return
		case 'n':
			r = '\n'
		case 't':
			r = '\t'
		case 'r':
			r = '\r'
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		default: // \" \\ \/ and anything else, as is
			r = rune(c)
		}
		if s.hiSurr != 0 {
			s.addRune(utf8.RuneError)
			s.hiSurr = 0
		}
		s.addRune(r)
	case stUnicode:
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			s.fail()
			return
		}
		s.uVal = s.uVal<<4 | rune(v)
		s.uHex++
		if s.uHex < 4 {
			return
		}
		s.state = stString
		r := s.uVal
		switch {
		case s.hiSurr != 0 && r >= 0xDC00 && r < 0xE000:
			s.addRune(0x10000 + (s.hiSurr-0xD800)<<10 + (r - 0xDC00))
			s.hiSurr = 0
			return
		case s.hiSurr != 0:
			s.addRune(utf8.RuneError)
			s.hiSurr = 0
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			s.hiSurr = r
		case r >= 0xDC00 && r < 0xE000:
			s.addRune(utf8.RuneError)
		default:
			s.addRune(r)
		}
	case stNumber:
		if c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
			if len(s.num) < MaxNumberBytes {
				s.num = append(s.num, c)
			}
			return
		}
		s.endNumber()
		s.step(c)
	case stLiteral:
		if c != s.lit[0] {
			s.fail()
			return
		}
		s.lit = s.lit[1:]
		if s.lit == "" {
			s.state = stAfterValue
			s.handle(s, s.litTok)
		}
	case stError:
	}
}

// camel rewrites a snake_case key to lowerCamelCase in place, as protobuf's
// JSON mapping accepts both ("system_instruction" is "systemInstruction").
func camel(k []byte) []byte {
	if bytes.IndexByte(k, '_') < 0 {
		return k
	}
	out := k[:0]
	up := false
	for _, c := range k {
		if c == '_' {
			up = true
			continue
		}
		if up && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		up = false
		out = append(out, c)
	}
	return out
}

// Reset readies the scanner for a new, independent document (the data of
// the next server-sent event), keeping its buffers.
func (s *Scanner) Reset() {
	s.stack = s.stack[:0]
	s.state = stValue
	s.inKey = false
	s.hiSurr = 0
	s.capDepth = -1
	s.capDone = false
	s.failed = false
	s.off = 0
}

// CutRune drops an incomplete UTF-8 sequence at the end of b: a string
// kept up to a cap is cut there, and the parsers cut their previews the
// same way.
func CutRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
