package provider

import (
	"encoding/json"
	"mime"
	"sync"

	"github.com/capsem/capsem/mitm/internal/jsonscan"
	"github.com/capsem/capsem/mitm/internal/sse"
)

// responseInfo is what a response handler extracts.
type responseInfo struct {
	opts     Options
	streamed bool
	id       string
	model    string
	stop     string
	errType  string
	text     capText
	thinking capText
	usage    []byte
	calls    []*toolAcc
}

func (r *responseInfo) newCall(id, name string, mcp bool) *toolAcc {
	t := &toolAcc{id: id, name: name, origin: origin(name, mcp), max: r.opts.MaxToolArgBytes}
	if len(r.calls) < maxToolCalls {
		r.calls = append(r.calls, t)
	}
	return t
}

// topKeys names the fields of a response object that every API has at its
// top level: the response's id, the model that answered, the usage object.
type topKeys struct{ id, model, usage string }

var (
	anthropicOpenAITop = topKeys{"id", "model", "usage"}
	geminiTop          = topKeys{"responseId", "modelVersion", "usageMetadata"}
)

// top reads the fields keys names in a JSON response object at depth base.
// It reports whether the token was one of them.
func (r *responseInfo) top(s *jsonscan.Scanner, k jsonscan.Kind, base int, keys topKeys) bool {
	switch {
	case s.At(base, keys.id):
		s.SetString(k, &r.id)
	case s.At(base, keys.model):
		s.SetString(k, &r.model)
	case s.At(base, keys.usage):
		if k == jsonscan.ObjStart {
			s.Capture(maxUsageBytes)
		} else if k == jsonscan.ObjEnd {
			r.setUsage(s.Captured())
		}
	default:
		return false
	}
	return true
}

// setUsageJSON keeps the usage object of an event, unless it has none.
func (r *responseInfo) setUsageJSON(raw json.RawMessage) {
	if len(raw) > 0 && string(raw) != "null" {
		r.setUsage(raw, false)
	}
}

func (r *responseInfo) setUsage(b []byte, truncated bool) {
	if !truncated {
		r.usage = append(r.usage[:0], b...)
	}
}

// responseHandler reads a response body: a JSON document through tok, or
// server-sent events through event.
type responseHandler interface {
	handler
	event(ev sse.Event)
}

type responseParser struct {
	mu     *sync.Mutex
	closed bool
	sse    *sse.Parser
	sc     *jsonscan.Scanner
	info   responseInfo
	h      responseHandler
}

func newResponseParser(c *Call, contentType string) *responseParser {
	r := &responseParser{mu: &c.respMu}
	r.info.opts = c.opts
	r.info.text.max = c.opts.PreviewBytes
	r.info.thinking.max = c.opts.PreviewBytes
	switch c.api {
	case apiAnthropicMessages:
		r.h = newAnthropicResponse(&r.info)
	case apiOpenAIChat:
		r.h = newChatResponse(&r.info)
	case apiOpenAIResponses:
		r.h = newResponsesResponse(&r.info)
	case apiGemini:
		r.h = newGeminiResponse(&r.info)
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		r.info.streamed = true
		r.sse = sse.NewParser(sseMaxEvent, r.h.event)
	} else {
		r.info.streamed = c.pathStream
		r.sc = c.bodyScanner(r.h)
	}
	return r
}

// Write feeds the response body. It always returns len(b), nil.
func (r *responseParser) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return len(b), nil
	}
	if r.sse != nil {
		r.sse.Write(b)
	} else {
		r.sc.Write(b)
	}
	return len(b), nil
}

func (r *responseParser) close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.sse != nil {
		r.sse.Close()
	} else {
		r.sc.Close()
	}
	r.h.done()
}
