package provider

import (
	"sync"

	"github.com/capsem/capsem/mitm/internal/jsonscan"
	"github.com/capsem/capsem/store"
)

// requestInfo is what a request handler extracts.
type requestInfo struct {
	model    string
	stream   bool
	system   capText
	messages int
	tools    int

	// Tool results: those of the messages after the last one the model
	// wrote, i.e. the results that are new in this request.
	pending []store.ToolResult
	inMsg   []store.ToolResult
}

// top reads the fields that the request of each API that has them names at
// its top level: model and stream. It reports whether the token was one of
// them.
func (r *requestInfo) top(s *jsonscan.Scanner, k jsonscan.Kind) bool {
	switch {
	case s.At(0, "model"):
		s.SetString(k, &r.model)
	case s.At(0, "stream"):
		r.stream = k == jsonscan.True
	default:
		return false
	}
	return true
}

// turn is the message being read by a request handler whose messages say
// who wrote them by their role alone (Anthropic's messages, Gemini's
// contents).
type turn struct {
	role string
	open bool
}

// tok counts a message of the array and ends it at its close; modelRole is
// the role of the messages the model wrote.
func (t *turn) tok(info *requestInfo, k jsonscan.Kind, modelRole string) {
	if isValueStart(k) {
		info.messages++
	}
	switch k {
	case jsonscan.ObjStart:
		t.role, t.open = "", true
	case jsonscan.ObjEnd:
		t.open = false
		info.endMessage(t.role == modelRole)
	}
}

// done ends a message that a body cut short had begun.
func (t *turn) done(info *requestInfo, modelRole string) {
	if t.open {
		info.endMessage(t.role == modelRole)
	}
}

// addResult records a tool result of the message being read.
func (r *requestInfo) addResult(t store.ToolResult) {
	if len(r.pending)+len(r.inMsg) < maxToolResults {
		r.inMsg = append(r.inMsg, t)
	}
}

// endMessage ends a message (or input item): one the model wrote makes the
// results before it old.
func (r *requestInfo) endMessage(fromModel bool) {
	if fromModel {
		r.pending = r.pending[:0]
	} else {
		r.pending = append(r.pending, r.inMsg...)
	}
	r.inMsg = r.inMsg[:0]
}

func (r *requestInfo) results() []store.ToolResult {
	if len(r.pending) == 0 {
		return nil
	}
	return append([]store.ToolResult(nil), r.pending...)
}

type handler interface {
	tok(s *jsonscan.Scanner, k jsonscan.Kind)
	done()
}

func isValueStart(k jsonscan.Kind) bool {
	return k != jsonscan.ObjEnd && k != jsonscan.ArrEnd && k != jsonscan.String
}

type requestParser struct {
	mu      *sync.Mutex
	closed  bool
	preview capText
	sc      *jsonscan.Scanner
	info    requestInfo
	h       handler
}

func newRequestParser(c *Call) *requestParser {
	r := &requestParser{mu: &c.reqMu}
	r.preview.max = c.opts.PreviewBytes
	r.info.system.max = c.opts.PreviewBytes
	switch c.api {
	case apiAnthropicMessages:
		r.h = &anthropicRequest{info: &r.info, opts: c.opts}
	case apiOpenAIChat:
		r.h = &chatRequest{info: &r.info, opts: c.opts}
	case apiOpenAIResponses:
		r.h = &responsesRequest{info: &r.info, opts: c.opts}
	case apiGemini:
		r.h = &geminiRequest{info: &r.info, opts: c.opts}
	}
	r.sc = c.bodyScanner(r.h)
	return r
}

// Write feeds the request body. It always returns len(b), nil.
func (r *requestParser) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return len(b), nil
	}
	r.preview.add(b)
	r.sc.Write(b)
	return len(b), nil
}

// close ends the body; the caller holds mu.
func (r *requestParser) close() {
	if r.closed {
		return
	}
	r.closed = true
	r.sc.Close()
	r.h.done()
	if len(r.info.inMsg) > 0 { // a body cut in the middle of a message
		r.info.endMessage(false)
	}
}
