package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// fakeAnthropic is a stand-in for the Anthropic API, enough for a real
// agent (claude-code) to run one tool loop against it:
//
//   - POST /v1/messages whose last user message carries the conversation's
//     k-th tool_result: a tool_use of then[k-1] if there is one and the
//     request offers it, else a final text message (end_turn) that quotes
//     the tool's output;
//   - POST /v1/messages that offers the tool fakeAnthropic wants run (the
//     agent loop) and carries no tool_result: a tool_use of that tool;
//   - any other POST /v1/messages (title generation, quota checks, side
//     calls): a short text;
//   - the other endpoints an agent calls at start: sensible answers.
//
// Messages are answered as server-sent events when the request asks for a
// stream (Anthropic's documented event sequence: message_start,
// content_block_start/delta/stop, message_delta with stop_reason and
// usage, message_stop) and as one JSON message otherwise. Every request is
// recorded for debugging.
type fakeAnthropic struct {
	// tool is the name of the tool to call and input its arguments.
	tool  string
	input map[string]any
	// then are the tools called next, one per turn: the answer to the
	// conversation's k-th tool_result is then[k-1], until they run out.
	then []fakeToolUse
	// final is the text of the final answer; the tool's output is appended.
	final string

	mu       sync.Mutex
	requests []fakeRequest
	nextID   int
}

// fakeToolUse is one tool call the fake answers with.
type fakeToolUse struct {
	tool  string
	input map[string]any
}

// fakeRequest is what fakeAnthropic saw of one request and how it answered.
type fakeRequest struct {
	Method, Path, Query string
	UserAgent           string
	APIKey              string // x-api-key, or the token of Authorization: Bearer
	Model               string
	Stream              bool
	Tools               int
	Answer              string // "tool_use", "final", "text", "count_tokens", "models", "hello", "404" …
	ToolUseID           string // the id of the tool_use answered, or of the tool_result received
	ToolResult          string // the text of the tool_result received
}

func (r fakeRequest) String() string {
	s := fmt.Sprintf("%s %s", r.Method, r.Path)
	if r.Query != "" {
		s += "?" + r.Query
	}
	if r.Model != "" {
		s += fmt.Sprintf(" model=%s stream=%v tools=%d", r.Model, r.Stream, r.Tools)
	}
	s += " -> " + r.Answer
	if r.ToolUseID != "" {
		s += " " + r.ToolUseID
	}
	if r.ToolResult != "" {
		s += fmt.Sprintf(" result=%q", r.ToolResult)
	}
	return s + fmt.Sprintf(" ua=%q", r.UserAgent)
}

func (f *fakeAnthropic) record(r fakeRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
}

// seen returns the recorded requests.
func (f *fakeAnthropic) seen() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

// log is the recorded requests, one a line.
func (f *fakeAnthropic) log() string {
	var b strings.Builder
	for _, r := range f.seen() {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}

func (f *fakeAnthropic) id(prefix string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	return fmt.Sprintf("%s_capsem%04d%d", prefix, f.nextID, time.Now().UnixNano()%100000)
}

// fakeMessagesRequest is the part of a Messages API request the fake reads.
type fakeMessagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or an array of blocks
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type fakeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // tool_result: a string or blocks
}

// fakeBlocks decodes a message's content, a string or an array of blocks.
func fakeBlocks(raw json.RawMessage) []fakeBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []fakeBlock{{Type: "text", Text: s}}
	}
	var bs []fakeBlock
	json.Unmarshal(raw, &bs)
	return bs
}

// resultText is the text of a tool_result's content.
func (b fakeBlock) resultText() string {
	var parts []string
	for _, c := range fakeBlocks(b.Content) {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := fakeRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, UserAgent: r.Header.Get("User-Agent"), APIKey: r.Header.Get("X-Api-Key")}
	if rec.APIKey == "" {
		rec.APIKey = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", f.id("req"))
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		var req fakeMessagesRequest
		if err := json.Unmarshal(body, &req); err != nil {
			rec.Answer = "400 " + err.Error()
			f.record(rec)
			writeJSON(http.StatusBadRequest, fakeAPIError("invalid_request_error", err.Error()))
			return
		}
		rec.Model, rec.Stream, rec.Tools = req.Model, req.Stream, len(req.Tools)
		f.answerMessages(w, &req, &rec)
		f.record(rec)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		rec.Answer = "count_tokens"
		f.record(rec)
		writeJSON(http.StatusOK, map[string]any{"input_tokens": 1 + len(body)/4})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/models"):
		rec.Answer = "models"
		f.record(rec)
		m := map[string]any{"type": "model", "id": "claude-sonnet-4-5-20250929", "display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z"}
		if id := strings.TrimPrefix(r.URL.Path, "/v1/models/"); id != r.URL.Path && id != "" {
			m["id"] = id
			writeJSON(http.StatusOK, m)
			return
		}
		writeJSON(http.StatusOK, map[string]any{"data": []any{m}, "has_more": false, "first_id": m["id"], "last_id": m["id"]})
	case r.URL.Path == "/api/hello":
		rec.Answer = "hello"
		f.record(rec)
		writeJSON(http.StatusOK, map[string]any{"message": "hello"})
	default:
		rec.Answer = "404"
		f.record(rec)
		writeJSON(http.StatusNotFound, fakeAPIError("not_found_error", "the capsem test fake does not serve "+r.URL.Path))
	}
}

func fakeAPIError(typ, msg string) jsonObject {
	return jsonObject{{"type", "error"}, {"error", jsonObject{{"type", typ}, {"message", msg}}}}
}

// answerMessages decides the answer to a Messages request and writes it.
func (f *fakeAnthropic) answerMessages(w http.ResponseWriter, req *fakeMessagesRequest, rec *fakeRequest) {
	var result *fakeBlock
	results := 0 // tool_results in the whole conversation
	for i, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range fakeBlocks(m.Content) {
			if b.Type != "tool_result" {
				continue
			}
			results++
			if i == len(req.Messages)-1 && result == nil {
				result = &b
			}
		}
	}
	next := fakeToolUse{tool: f.tool, input: f.input}
	if result != nil {
		next = fakeToolUse{}
		if results <= len(f.then) {
			next = f.then[results-1]
		}
	}
	offered := false
	for _, t := range req.Tools {
		offered = offered || (next.tool != "" && t.Name == next.tool)
	}
	var content []fakeBlock
	stop := "end_turn"
	switch {
	case offered:
		in, _ := json.Marshal(next.input)
		rec.Answer, rec.ToolUseID = "tool_use", f.id("toolu")
		if result != nil {
			rec.ToolResult = result.resultText()
		}
		content = []fakeBlock{
			{Type: "text", Text: "I will run the tool."},
			{Type: "tool_use", ID: rec.ToolUseID, Name: next.tool, Input: in},
		}
		stop = "tool_use"
	case result != nil:
		rec.Answer, rec.ToolUseID, rec.ToolResult = "final", result.ToolUseID, result.resultText()
		content = []fakeBlock{{Type: "text", Text: f.final + " The tool said: " + strings.TrimSpace(rec.ToolResult)}}
	default:
		rec.Answer = "text"
		content = []fakeBlock{{Type: "text", Text: "Capsem test"}}
	}
	model := req.Model
	if model == "" {
		model = "claude-sonnet-4-5-20250929"
	}
	msgID := f.id("msg")
	const inputTokens, cacheRead = 42, 7
	outputTokens := 5
	for _, c := range content {
		outputTokens += len(c.Text)/4 + len(c.Input)/4
	}
	usage := func(out int) jsonObject {
		return jsonObject{{"input_tokens", inputTokens}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", cacheRead}, {"output_tokens", out}}
	}
	w.Header().Set("request-id", f.id("req"))
	if !req.Stream {
		var blocks []any
		for _, c := range content {
			if c.Type == "tool_use" {
				blocks = append(blocks, jsonObject{{"type", "tool_use"}, {"id", c.ID}, {"name", c.Name}, {"input", c.Input}})
			} else {
				blocks = append(blocks, jsonObject{{"type", "text"}, {"text", c.Text}})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(jsonObject{
			{"id", msgID}, {"type", "message"}, {"role", "assistant"}, {"model", model}, {"content", blocks},
			{"stop_reason", stop}, {"stop_sequence", nil}, {"usage", usage(outputTokens)},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	event := func(name string, data jsonObject) {
		b, _ := json.Marshal(append(jsonObject{{"type", name}}, data...))
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", jsonObject{{"message", jsonObject{
		{"id", msgID}, {"type", "message"}, {"role", "assistant"}, {"model", model}, {"content", []any{}},
		{"stop_reason", nil}, {"stop_sequence", nil}, {"usage", usage(1)},
	}}})
	event("ping", nil)
	for i, c := range content {
		// Each block in two deltas, so that a reader must join them.
		switch c.Type {
		case "text":
			event("content_block_start", jsonObject{{"index", i}, {"content_block", jsonObject{{"type", "text"}, {"text", ""}}}})
			half := len(c.Text) / 2
			for _, part := range []string{c.Text[:half], c.Text[half:]} {
				event("content_block_delta", jsonObject{{"index", i}, {"delta", jsonObject{{"type", "text_delta"}, {"text", part}}}})
			}
		case "tool_use":
			event("content_block_start", jsonObject{{"index", i}, {"content_block", jsonObject{{"type", "tool_use"}, {"id", c.ID}, {"name", c.Name}, {"input", jsonObject{}}}}})
			in := string(c.Input)
			half := len(in) / 2
			for _, part := range []string{in[:half], in[half:]} {
				event("content_block_delta", jsonObject{{"index", i}, {"delta", jsonObject{{"type", "input_json_delta"}, {"partial_json", part}}}})
			}
		}
		event("content_block_stop", jsonObject{{"index", i}})
	}
	event("message_delta", jsonObject{{"delta", jsonObject{{"stop_reason", stop}, {"stop_sequence", nil}}}, {"usage", jsonObject{{"output_tokens", outputTokens}}}})
	event("message_stop", nil)
}

// jsonObject is a JSON object whose keys keep their order, so that the
// fake's JSON reads like the real API's ("type" first).
type jsonObject []struct {
	k string
	v any
}

func (o jsonObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(f.k)
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}
