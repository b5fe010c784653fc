package provider

import (
	"encoding/json"
	"strings"

	"github.com/capsem/capsem/mitm/internal/jsonscan"
	"github.com/capsem/capsem/mitm/internal/sse"
	"github.com/capsem/capsem/store"
)

// OpenAI Chat Completions API: POST /v1/chat/completions.
// https://platform.openai.com/docs/api-reference/chat

// chatRequest reads a Chat Completions request: model, stream, messages
// (system or developer messages give the system prompt, role "tool"
// messages after the last assistant message the tool results), tools.
type chatRequest struct {
	info *requestInfo
	opts Options

	msgOpen bool
	msg     struct {
		role    string
		callID  string
		content capText
	}
}

func (c *chatRequest) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	switch s.Depth() {
	case 1:
		c.info.top(s, k)
	case 2:
		switch {
		case s.At(0, "messages", "#"):
			if isValueStart(k) {
				c.info.messages++
			}
			switch k {
			case jsonscan.ObjStart:
				c.msg.role, c.msg.callID = "", ""
				c.msg.content.max = c.opts.PreviewBytes
				c.msg.content.reset()
				c.msgOpen = true
			case jsonscan.ObjEnd:
				c.msgOpen = false
				c.endMessage()
			}
		case s.At(0, "tools", "#"), s.At(0, "functions", "#"):
			if isValueStart(k) {
				c.info.tools++
			}
		}
	case 3:
		if k != jsonscan.String {
			return
		}
		switch {
		case s.At(0, "messages", "#", "role"):
			c.msg.role = string(s.Str())
		case s.At(0, "messages", "#", "tool_call_id"):
			c.msg.callID = string(s.Str())
		case s.At(0, "messages", "#", "content"):
			c.msg.content.add(s.Str())
		}
	case 5:
		if k == jsonscan.String && s.At(0, "messages", "#", "content", "#", "text") {
			c.msg.content.sep()
			c.msg.content.add(s.Str())
		}
	}
}

func (c *chatRequest) endMessage() {
	switch c.msg.role {
	case "system", "developer":
		c.info.system.sep()
		c.info.system.add(c.msg.content.b)
	case "tool":
		c.info.addResult(store.ToolResult{CallID: c.msg.callID, ContentPreview: c.msg.content.String()})
	}
	c.info.endMessage(c.msg.role == "assistant")
}

// done keeps what a body cut short had begun.
func (c *chatRequest) done() {
	if c.msgOpen {
		c.endMessage()
	}
}

// chatResponse reads a chat.completion JSON body or a stream of
// chat.completion.chunk events (tool call deltas assembled by index, the
// usage chunk sent with stream_options.include_usage, [DONE]). Only the
// first choice is read.
type chatResponse struct {
	info  *responseInfo
	calls map[int]*toolAcc // streaming: by tool call index
	cur   *toolAcc         // JSON body: the tool call being read
}

func newChatResponse(info *responseInfo) *chatResponse {
	return &chatResponse{info: info, calls: map[int]*toolAcc{}}
}

type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error *openAIError    `json:"error"`
}

type openAIError struct {
	Type string          `json:"type"`
	Code json.RawMessage `json:"code"`
}

// kind names an OpenAI error by its type, or its code when it has no type.
func (e *openAIError) kind() string {
	if e.Type != "" {
		return e.Type
	}
	var s string
	if json.Unmarshal(e.Code, &s) == nil && s != "" {
		return s
	}
	return strings.Trim(string(e.Code), `"`)
}

func (c *chatResponse) event(ev sse.Event) {
	if strings.TrimSpace(ev.Data) == "[DONE]" {
		return
	}
	var e chatChunk
	if json.Unmarshal([]byte(ev.Data), &e) != nil {
		return
	}
	info := c.info
	if e.ID != "" && info.id == "" {
		info.id = e.ID
	}
	if e.Model != "" {
		info.model = e.Model
	}
	info.setUsageJSON(e.Usage)
	if e.Error != nil {
		info.errType = e.Error.kind()
	}
	for _, ch := range e.Choices {
		if ch.Index != 0 {
			continue
		}
		d := &ch.Delta
		if d.Content != nil {
			info.text.addString(*d.Content)
		}
		if d.Refusal != nil {
			info.text.addString(*d.Refusal)
		}
		if d.ReasoningContent != nil {
			info.thinking.addString(*d.ReasoningContent)
		} else if d.Reasoning != nil {
			info.thinking.addString(*d.Reasoning)
		}
		for _, tc := range d.ToolCalls {
			t := c.calls[tc.Index]
			if t == nil {
				if len(c.calls) >= maxToolCalls {
					continue
				}
				t = info.newCall(tc.ID, tc.Function.Name, false)
				c.calls[tc.Index] = t
			}
			if t.id == "" {
				t.id = tc.ID
			}
			if t.name == "" && tc.Function.Name != "" {
				t.name = tc.Function.Name
				t.origin = origin(t.name, false)
			}
			t.addArgs(tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			info.stop = *ch.FinishReason
		}
	}
}

func (c *chatResponse) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	info := c.info
	if s.Depth() == 1 {
		info.top(s, k, 0, anthropicOpenAITop)
		return
	}
	if s.At(0, "error", "type") || s.At(0, "error", "code") {
		if (k == jsonscan.String || k == jsonscan.Number) && info.errType == "" {
			if k == jsonscan.Number {
				info.errType = string(s.Num())
			} else {
				info.errType = string(s.Str())
			}
		}
		return
	}
	if !s.HasPrefix(0, "choices", "#") || s.Index(1) != 0 {
		return
	}
	switch {
	case s.At(0, "choices", "#", "finish_reason"):
		s.SetString(k, &info.stop)
	case s.At(0, "choices", "#", "message", "content"), s.At(0, "choices", "#", "message", "refusal"):
		if k == jsonscan.String {
			info.text.add(s.Str())
		}
	case s.At(0, "choices", "#", "message", "reasoning_content"), s.At(0, "choices", "#", "message", "reasoning"):
		if k == jsonscan.String {
			info.thinking.add(s.Str())
		}
	case s.At(0, "choices", "#", "message", "tool_calls", "#"):
		switch k {
		case jsonscan.ObjStart:
			c.cur = info.newCall("", "", false)
		case jsonscan.ObjEnd:
			if c.cur != nil {
				c.cur.origin = origin(c.cur.name, false)
			}
			c.cur = nil
		}
	case c.cur == nil:
	case s.At(0, "choices", "#", "message", "tool_calls", "#", "id"):
		s.SetString(k, &c.cur.id)
	case s.At(0, "choices", "#", "message", "tool_calls", "#", "function", "name"),
		s.At(0, "choices", "#", "message", "tool_calls", "#", "custom", "name"):
		s.SetString(k, &c.cur.name)
	case s.At(0, "choices", "#", "message", "tool_calls", "#", "function", "arguments"),
		s.At(0, "choices", "#", "message", "tool_calls", "#", "custom", "input"):
		switch k {
		case jsonscan.StrStart:
			s.Keep(info.opts.MaxToolArgBytes)
		case jsonscan.String:
			c.cur.setArgs(string(s.Str()))
			c.cur.trunc = s.StrTruncated()
		}
	}
}

func (c *chatResponse) done() {}
