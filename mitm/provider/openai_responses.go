package provider

import (
	"encoding/json"

	"github.com/capsem/capsem/mitm/internal/jsonscan"
	"github.com/capsem/capsem/mitm/internal/sse"
	"github.com/capsem/capsem/store"
)

// OpenAI Responses API: POST /v1/responses.
// https://platform.openai.com/docs/api-reference/responses

// modelItemTypes are the input item types the model produced in an earlier
// turn: results before the last of them are not new.
var modelItemTypes = map[string]bool{
	"function_call":         true,
	"custom_tool_call":      true,
	"reasoning":             true,
	"web_search_call":       true,
	"file_search_call":      true,
	"computer_call":         true,
	"local_shell_call":      true,
	"mcp_call":              true,
	"image_generation_call": true,
	"code_interpreter_call": true,
}

// outputItemTypes are the input item types that carry a tool's output.
var outputItemTypes = map[string]bool{
	"function_call_output":    true,
	"custom_tool_call_output": true,
	"computer_call_output":    true,
	"local_shell_call_output": true,
}

// responsesRequest reads a Responses request: model, stream, instructions
// (the system prompt, with system or developer input messages), input (a
// string or items), tools, and the *_call_output items after the last item
// the model produced.
type responsesRequest struct {
	info *requestInfo
	opts Options

	itemOpen bool
	item     struct {
		typ, role, callID string
		txt               capText
	}
}

func (r *responsesRequest) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	switch s.Depth() {
	case 1:
		if r.info.top(s, k) {
			return
		}
		switch {
		case s.At(0, "instructions"):
			if k == jsonscan.String {
				r.info.system.sep()
				r.info.system.add(s.Str())
			}
		case s.At(0, "input"):
			if k == jsonscan.StrStart {
				r.info.messages++
			}
		}
	case 2:
		switch {
		case s.At(0, "input", "#"):
			if isValueStart(k) {
				r.info.messages++
			}
			switch k {
			case jsonscan.ObjStart:
				r.item.typ, r.item.role, r.item.callID = "", "", ""
				r.item.txt.max = r.opts.PreviewBytes
				r.item.txt.reset()
				r.itemOpen = true
			case jsonscan.ObjEnd:
				r.itemOpen = false
				r.endItem()
			}
		case s.At(0, "tools", "#"):
			if isValueStart(k) {
				r.info.tools++
			}
		}
	case 3:
		if k != jsonscan.String {
			return
		}
		switch {
		case s.At(0, "input", "#", "type"):
			r.item.typ = string(s.Str())
		case s.At(0, "input", "#", "role"):
			r.item.role = string(s.Str())
		case s.At(0, "input", "#", "call_id"):
			r.item.callID = string(s.Str())
		case s.At(0, "input", "#", "output"), s.At(0, "input", "#", "content"):
			r.item.txt.add(s.Str())
		}
	case 5:
		if k == jsonscan.String && (s.At(0, "input", "#", "output", "#", "text") || s.At(0, "input", "#", "content", "#", "text")) {
			r.item.txt.sep()
			r.item.txt.add(s.Str())
		}
	}
}

func (r *responsesRequest) endItem() {
	it := &r.item
	switch {
	case outputItemTypes[it.typ]:
		r.info.addResult(store.ToolResult{CallID: it.callID, ContentPreview: it.txt.String()})
	case (it.typ == "" || it.typ == "message") && (it.role == "system" || it.role == "developer"):
		r.info.system.sep()
		r.info.system.add(it.txt.b)
	}
	r.info.endMessage(it.role == "assistant" || modelItemTypes[it.typ])
}

// done keeps what a body cut short had begun.
func (r *responsesRequest) done() {
	if r.itemOpen {
		r.endItem()
	}
}

// responsesResponse reads a response object (JSON body) or the stream of
// response.* events: output text and reasoning deltas, function call items
// and their argument deltas, and response.completed (or .incomplete,
// .failed) for the status and usage.
type responsesResponse struct {
	info  *responseInfo
	calls map[int]*toolAcc // streaming: by output_index

	item struct { // JSON body: the output item being read
		typ, id, callID, name string
		args                  []byte
		argsTrunc             bool
		txt, think            capText
	}
	status, incomplete string
}

func newResponsesResponse(info *responseInfo) *responsesResponse {
	return &responsesResponse{info: info, calls: map[int]*toolAcc{}}
}

type responsesObject struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage json.RawMessage `json:"usage"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

type responsesEvent struct {
	Type        string           `json:"type"`
	Response    *responsesObject `json:"response"`
	OutputIndex int              `json:"output_index"`
	Item        *struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Input     string `json:"input"`
	} `json:"item"`
	Delta     string `json:"delta"`
	Arguments string `json:"arguments"`
	Input     string `json:"input"`
	Code      string `json:"code"`
}

func isCallItem(t string) bool {
	return t == "function_call" || t == "custom_tool_call" || t == "mcp_call"
}

func (r *responsesResponse) event(ev sse.Event) {
	var e responsesEvent
	if json.Unmarshal([]byte(ev.Data), &e) != nil {
		return
	}
	info := r.info
	switch e.Type {
	case "response.created", "response.in_progress", "response.queued",
		"response.completed", "response.incomplete", "response.failed":
		if o := e.Response; o != nil {
			r.object(o)
		}
	case "response.output_item.added", "response.output_item.done":
		it := e.Item
		if it == nil || !isCallItem(it.Type) {
			return
		}
		t := r.calls[e.OutputIndex]
		id := it.CallID
		if it.Type == "mcp_call" {
			id = it.ID
		}
		if t == nil {
			if len(r.calls) >= maxToolCalls {
				return
			}
			t = info.newCall(id, it.Name, it.Type == "mcp_call")
			r.calls[e.OutputIndex] = t
		}
		if t.id == "" {
			t.id = id
		}
		if t.name == "" && it.Name != "" {
			t.name = it.Name
			t.origin = origin(it.Name, it.Type == "mcp_call")
		}
		if a := it.Arguments + it.Input; a != "" {
			if e.Type == "response.output_item.done" {
				t.setArgs(a)
			} else {
				t.addArgs(a)
			}
		}
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta", "response.mcp_call_arguments.delta":
		if t := r.calls[e.OutputIndex]; t != nil {
			t.addArgs(e.Delta)
		}
	case "response.function_call_arguments.done", "response.custom_tool_call_input.done", "response.mcp_call_arguments.done":
		if t := r.calls[e.OutputIndex]; t != nil {
			if a := e.Arguments + e.Input; a != "" {
				t.setArgs(a)
			}
		}
	case "response.output_text.delta", "response.refusal.delta":
		info.text.addString(e.Delta)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		info.thinking.addString(e.Delta)
	case "response.reasoning_summary_part.added":
		info.thinking.sep()
	case "error":
		if e.Code != "" {
			info.errType = e.Code
		} else {
			info.errType = "error"
		}
	}
}

// object takes what a response object says about the whole response.
func (r *responsesResponse) object(o *responsesObject) {
	info := r.info
	if o.ID != "" {
		info.id = o.ID
	}
	if o.Model != "" {
		info.model = o.Model
	}
	if o.Status != "" {
		info.stop = o.Status
	}
	if o.IncompleteDetails != nil && o.IncompleteDetails.Reason != "" {
		info.stop = o.IncompleteDetails.Reason
	}
	info.setUsageJSON(o.Usage)
	if o.Error != nil && o.Error.Code != "" {
		info.errType = o.Error.Code
	}
}

func (r *responsesResponse) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	info := r.info
	switch s.Depth() {
	case 1:
		if !info.top(s, k, 0, anthropicOpenAITop) && s.At(0, "status") {
			s.SetString(k, &r.status)
		}
		return
	case 2:
		switch {
		case s.At(0, "incomplete_details", "reason"):
			s.SetString(k, &r.incomplete)
		case s.At(0, "error", "code"), s.At(0, "error", "type"):
			if k == jsonscan.String && info.errType == "" {
				info.errType = string(s.Str())
			}
		case s.At(0, "output", "#"):
			switch k {
			case jsonscan.ObjStart:
				it := &r.item
				it.typ, it.id, it.callID, it.name = "", "", "", ""
				it.args, it.argsTrunc = it.args[:0], false
				it.txt.max, it.think.max = info.opts.PreviewBytes, info.opts.PreviewBytes
				it.txt.reset()
				it.think.reset()
			case jsonscan.ObjEnd:
				r.endItem()
			}
		}
		return
	}
	if !s.HasPrefix(0, "output", "#") {
		return
	}
	it := &r.item
	switch {
	case s.At(0, "output", "#", "type"):
		s.SetString(k, &it.typ)
	case s.At(0, "output", "#", "id"):
		s.SetString(k, &it.id)
	case s.At(0, "output", "#", "call_id"):
		s.SetString(k, &it.callID)
	case s.At(0, "output", "#", "name"):
		s.SetString(k, &it.name)
	case s.At(0, "output", "#", "arguments"), s.At(0, "output", "#", "input"):
		switch k {
		case jsonscan.StrStart:
			s.Keep(info.opts.MaxToolArgBytes)
		case jsonscan.String:
			it.args = append(it.args[:0], s.Str()...)
			it.argsTrunc = s.StrTruncated()
		}
	case s.At(0, "output", "#", "content", "#", "text"), s.At(0, "output", "#", "content", "#", "refusal"):
		if k == jsonscan.String {
			it.txt.sep()
			it.txt.add(s.Str())
		}
	case s.At(0, "output", "#", "summary", "#", "text"):
		if k == jsonscan.String {
			it.think.sep()
			it.think.add(s.Str())
		}
	}
}

func (r *responsesResponse) endItem() {
	it := &r.item
	info := r.info
	switch {
	case it.typ == "message":
		info.text.sep()
		info.text.add(it.txt.b)
	case it.typ == "reasoning":
		info.thinking.sep()
		info.thinking.add(it.think.b)
		info.thinking.sep()
		info.thinking.add(it.txt.b)
	case isCallItem(it.typ):
		id := it.callID
		if it.typ == "mcp_call" {
			id = it.id
		}
		t := info.newCall(id, it.name, it.typ == "mcp_call")
		t.setArgs(string(it.args))
		t.trunc = it.argsTrunc
	}
}

func (r *responsesResponse) done() {
	if r.status != "" {
		r.info.stop = r.status
	}
	if r.incomplete != "" {
		r.info.stop = r.incomplete
	}
}
