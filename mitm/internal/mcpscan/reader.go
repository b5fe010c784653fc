package mcpscan

import (
	"strings"

	"github.com/capsem/capsem/mitm/internal/jsonscan"
)

// reader turns the tokens of one JSON document (a body, or one event's
// data) into messages: a top-level object is a message, and so is each
// object element of a top-level array (a batch).
type reader struct {
	previewBytes int
	fn           func(Message)
	sc           *jsonscan.Scanner
	jsonrpc      bool // a JSON-RPC 2.0 message was seen (see Body.JSONRPC)
	suspect      bool // an object with a method but not "jsonrpc": "2.0" was seen (see Body.Suspect)

	// The message being read; base is the depth of its members (0 for a
	// message at the top level, 1 in a batch), -1 when none is open.
	base      int
	start     int64
	msg       Message
	version   bool // "jsonrpc": "2.0"
	hasID     bool
	hasMethod bool
	hasResult bool
	hasError  bool
	name, uri string
	tools     bool  // result.tools is an array
	seen      uint8 // the deciding members met so far (seenJSONRPC, …)
}

// The members whose second appearance makes a message ambiguous.
const (
	seenJSONRPC uint8 = 1 << iota
	seenID
	seenMethod
	seenParams
	seenName
	seenURI
)

// valueStart reports whether k starts a value (a string's StrStart, not
// its String).
func valueStart(k jsonscan.Kind) bool {
	switch k {
	case jsonscan.ObjStart, jsonscan.ArrStart, jsonscan.StrStart, jsonscan.Number, jsonscan.True, jsonscan.False, jsonscan.Null:
		return true
	}
	return false
}

// foldCheck marks the message ambiguous when key starts a value and is
// one of names in another case ("Method", "paramſ"): encoding/json, and
// the servers built on it, match member names ignoring case, while this
// package matches them exactly.
func (r *reader) foldCheck(key string, k jsonscan.Kind, names ...string) {
	if !valueStart(k) {
		return
	}
	for _, n := range names {
		if key != n && strings.EqualFold(key, n) {
			r.msg.Ambiguous = true
		}
	}
}

// once records that a deciding member starts a value; a second start is
// ambiguous.
func (r *reader) once(bit uint8, k jsonscan.Kind) {
	if !valueStart(k) {
		return
	}
	if r.seen&bit != 0 {
		r.msg.Ambiguous = true
	}
	r.seen |= bit
}

func newReader(previewBytes int, fn func(Message)) *reader {
	if previewBytes <= 0 {
		previewBytes = DefaultPreviewBytes
	}
	if fn == nil {
		fn = func(Message) {}
	}
	r := &reader{previewBytes: previewBytes, fn: fn, base: -1}
	// Strings are kept only where the handler asks (Keep); the rest are
	// counted, never held.
	r.sc = jsonscan.New(0, r.tok)
	return r
}

func (r *reader) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	d := s.Depth()
	if r.base < 0 {
		// A message starts: an object at the top, or in a top-level array.
		if k == jsonscan.ObjStart && (d == 0 || d == 1 && s.Index(0) >= 0) {
			r.begin(d, s.Offset()-1)
		}
		return
	}
	if d == r.base {
		if k == jsonscan.ObjEnd {
			r.end(s.Offset())
		}
		return
	}
	if d == r.base+1 {
		r.member(s, k)
		return
	}
	r.inner(s, k)
}

func (r *reader) begin(base int, start int64) {
	r.base, r.start = base, start
	r.msg = Message{}
	r.version, r.hasID, r.hasMethod, r.hasResult, r.hasError = false, false, false, false, false
	r.name, r.uri, r.tools, r.seen = "", "", false, 0
}

// member reads a value at the top of the message.
func (r *reader) member(s *jsonscan.Scanner, k jsonscan.Kind) {
	key := string(s.Key(r.base))
	start := k != jsonscan.ObjEnd && k != jsonscan.ArrEnd && k != jsonscan.StrStart
	r.foldCheck(key, k, "jsonrpc", "id", "method", "params")
	switch key {
	case "jsonrpc":
		r.once(seenJSONRPC, k)
	case "id":
		r.once(seenID, k)
	case "method":
		r.once(seenMethod, k)
	case "params":
		r.once(seenParams, k)
	}
	switch key {
	case "jsonrpc":
		if k == jsonscan.StrStart {
			s.Keep(8)
		}
		if k == jsonscan.String {
			// Sticky: a second "jsonrpc" of another value does not hide
			// the message (it is Ambiguous instead).
			r.version = r.version || string(s.Str()) == "2.0"
		}
	case "id":
		switch k {
		case jsonscan.StrStart:
			s.Keep(MaxIDBytes)
		case jsonscan.String:
			b, _ := appendString(nil, s.Str(), MaxIDBytes)
			r.msg.ID, r.hasID = string(b), true
		case jsonscan.Number:
			r.msg.ID, r.hasID = string(s.Num()), true
		case jsonscan.Null:
			r.msg.ID, r.hasID = "null", true
		case jsonscan.True:
			r.msg.ID, r.hasID = "true", true
		case jsonscan.False:
			r.msg.ID, r.hasID = "false", true
		}
	case "method":
		if k == jsonscan.StrStart {
			s.Keep(MaxMethodBytes)
		}
		if k == jsonscan.String {
			r.msg.Method, r.hasMethod = string(s.Str()), true
		}
	case "params", "result", "error":
		if start {
			switch key {
			case "result":
				r.hasResult = true
			case "error":
				r.hasError = true
			}
		}
		r.preview(s, k)
	}
	if r.version && (r.hasMethod || r.hasResult || r.hasError) {
		r.jsonrpc = true
	}
}

// preview keeps the params, result or error value as compact JSON. The
// last of them wins: a message has only one, and params before a result
// would be a broken message anyway.
func (r *reader) preview(s *jsonscan.Scanner, k jsonscan.Kind) {
	m := &r.msg
	switch k {
	case jsonscan.ObjStart, jsonscan.ArrStart:
		s.Capture(r.previewBytes)
	case jsonscan.ObjEnd, jsonscan.ArrEnd:
		b, trunc := s.Captured()
		m.Preview, m.PreviewTruncated = string(jsonscan.CutRune(b)), trunc
	case jsonscan.StrStart:
		s.Keep(r.previewBytes)
	case jsonscan.String:
		b, trunc := appendString(nil, s.Str(), r.previewBytes)
		m.Preview, m.PreviewTruncated = string(b), trunc || s.StrTruncated()
	case jsonscan.Number:
		m.Preview, m.PreviewTruncated = string(s.Num()), false
	case jsonscan.True:
		m.Preview, m.PreviewTruncated = "true", false
	case jsonscan.False:
		m.Preview, m.PreviewTruncated = "false", false
	case jsonscan.Null:
		m.Preview, m.PreviewTruncated = "null", false
	}
}

// inner reads what is deeper: params.name and params.uri, error.code and
// error.message, result.tools[i].name.
func (r *reader) inner(s *jsonscan.Scanner, k jsonscan.Kind) {
	b := r.base
	m := &r.msg
	if s.Depth() == b+2 && s.HasPrefix(b, "params") {
		r.foldCheck(string(s.Key(b+1)), k, "name", "uri")
	}
	switch {
	case s.At(b, "params", "name"), s.At(b, "params", "uri"):
		isName := s.At(b, "params", "name")
		if isName {
			r.once(seenName, k)
		} else {
			r.once(seenURI, k)
		}
		if k == jsonscan.StrStart {
			s.Keep(MaxToolBytes)
		}
		if k == jsonscan.String {
			if s.StrTruncated() {
				m.Ambiguous = true // cut: a rule could match the cut name and not the whole
			}
			if isName {
				r.name = string(s.Str())
			} else {
				r.uri = string(s.Str())
			}
		}
	case s.At(b, "error", "code"):
		if k == jsonscan.Number {
			m.ErrorCode = atoi(s.Num())
		}
	case s.At(b, "error", "message"):
		if k == jsonscan.StrStart {
			s.Keep(r.previewBytes)
		}
		if k == jsonscan.String {
			m.ErrorMessage = string(s.Str())
		}
	case s.At(b, "result", "tools"):
		if k == jsonscan.ArrStart {
			r.tools = true
			m.ToolNames, m.ToolsTruncated = m.ToolNames[:0], false
		}
	case s.At(b, "result", "tools", "#", "name"):
		if k == jsonscan.StrStart {
			s.Keep(MaxToolBytes)
		}
		if k != jsonscan.String {
			return
		}
		if len(m.ToolNames) >= MaxToolNames {
			m.ToolsTruncated = true
			return
		}
		m.ToolNames = append(m.ToolNames, string(s.Str()))
	}
}

// end completes the message at its closing brace and hands it out if it
// is JSON-RPC 2.0.
func (r *reader) end(off int64) {
	r.base = -1
	m := r.msg
	m.Bytes = off - r.start
	if m.Ambiguous && (!r.version || !r.hasMethod && !r.hasError && !r.hasResult) {
		// Made no message ("Method" for method, say), but a server might
		// read one: a caller deciding on requests refuses the body.
		r.suspect = true
	}
	switch {
	case !r.version:
		if r.hasMethod {
			r.suspect = true
		}
		return
	case r.hasMethod && r.hasID:
		m.Kind = Request
	case r.hasMethod:
		m.Kind = Notification
	case r.hasError:
		m.Kind = Error
	case r.hasResult:
		m.Kind = Response
	default:
		return
	}
	if m.Kind == Request || m.Kind == Notification {
		switch toolParam(m.Method) {
		case "name":
			m.Tool = r.name
		case "uri":
			m.Tool = r.uri
		}
		m.ErrorCode, m.ErrorMessage = 0, ""
	}
	if m.Kind != Response || !r.tools {
		m.ToolNames, m.ToolsTruncated = nil, false
	}
	if m.Kind != Error {
		m.ErrorCode, m.ErrorMessage = 0, ""
	}
	r.fn(m)
	r.msg.ToolNames = nil // handed out: the next message gets its own
}

// write feeds the document's next bytes.
func (r *reader) write(b []byte) { r.sc.Write(b) }

// close ends the document.
func (r *reader) close() { r.sc.Close() }

// reset readies the reader for a new document (the next event's data).
func (r *reader) reset() {
	r.sc.Reset()
	r.base = -1
}
