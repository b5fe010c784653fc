package provider

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/capsem/capsem/mitm/internal/jsonscan"
	"github.com/capsem/capsem/mitm/internal/sse"
	"github.com/capsem/capsem/store"
)

// Anthropic Messages API: POST /v1/messages.
// https://docs.anthropic.com/en/api/messages and .../messages-streaming

// anthropicRequest reads a Messages request: model, stream, system (a string
// or text blocks), messages, tools, and the tool_result blocks of the user
// messages after the last assistant message.
type anthropicRequest struct {
	info *requestInfo
	opts Options

	msg     turn
	blkOpen bool
	blk     struct {
		typ     string
		id      string
		isErr   bool
		content capText
	}
}

func (a *anthropicRequest) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	switch s.Depth() {
	case 1:
		if !a.info.top(s, k) && s.At(0, "system") && k == jsonscan.String {
			a.info.system.add(s.Str())
		}
	case 2:
		switch {
		case s.At(0, "messages", "#"):
			a.msg.tok(a.info, k, "assistant")
		case s.At(0, "tools", "#"):
			if isValueStart(k) {
				a.info.tools++
			}
		}
	case 3:
		switch {
		case s.At(0, "system", "#", "text"):
			if k == jsonscan.String {
				a.info.system.sep()
				a.info.system.add(s.Str())
			}
		case s.At(0, "messages", "#", "role"):
			s.SetString(k, &a.msg.role)
		}
	case 4:
		if s.At(0, "messages", "#", "content", "#") {
			switch k {
			case jsonscan.ObjStart:
				a.blk.typ, a.blk.id, a.blk.isErr = "", "", false
				a.blk.content.max = a.opts.PreviewBytes
				a.blk.content.reset()
				a.blkOpen = true
			case jsonscan.ObjEnd:
				a.blkOpen = false
				a.endBlock()
			}
		}
	case 5:
		switch {
		case s.At(0, "messages", "#", "content", "#", "type"):
			s.SetString(k, &a.blk.typ)
		case s.At(0, "messages", "#", "content", "#", "tool_use_id"):
			s.SetString(k, &a.blk.id)
		case s.At(0, "messages", "#", "content", "#", "is_error"):
			a.blk.isErr = k == jsonscan.True
		case s.At(0, "messages", "#", "content", "#", "content"):
			if k == jsonscan.String {
				a.blk.content.add(s.Str())
			}
		}
	case 7:
		if s.At(0, "messages", "#", "content", "#", "content", "#", "text") && k == jsonscan.String {
			a.blk.content.sep()
			a.blk.content.add(s.Str())
		}
	}
}

func (a *anthropicRequest) endBlock() {
	if a.blk.typ == "tool_result" {
		a.info.addResult(store.ToolResult{CallID: a.blk.id, ContentPreview: a.blk.content.String(), IsError: a.blk.isErr})
	}
}

// done keeps what a body cut short had begun: the block and the message
// being read count as ended.
func (a *anthropicRequest) done() {
	if a.blkOpen {
		a.endBlock()
	}
	a.msg.done(a.info, "assistant")
}

// anthropicResponse reads a Messages response: a JSON message, or the event
// stream message_start, content_block_start/delta/stop, message_delta,
// message_stop (and ping, error).
type anthropicResponse struct {
	info  *responseInfo
	usage map[string]json.RawMessage // merged from message_start and message_delta

	blocks map[int]*anthropicBlock // streaming, by content block index

	blk anthropicBlock // JSON body: the content block being read
}

type anthropicBlock struct {
	typ   string
	id    string
	name  string
	text  capText
	input []byte // the tool input given at the block's start (or in the JSON body)
	call  *toolAcc
}

const maxBlocks = 4096

func newAnthropicResponse(info *responseInfo) *anthropicResponse {
	return &anthropicResponse{info: info, usage: map[string]json.RawMessage{}, blocks: map[int]*anthropicBlock{}}
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID         string          `json:"id"`
		Model      string          `json:"model"`
		StopReason string          `json:"stop_reason"`
		Usage      json.RawMessage `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		Input    json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage json.RawMessage `json:"usage"`
	Error *struct {
		Type string `json:"type"`
	} `json:"error"`
}

func (a *anthropicResponse) event(ev sse.Event) {
	var e anthropicEvent
	if json.Unmarshal([]byte(ev.Data), &e) != nil {
		return
	}
	info := a.info
	switch e.Type {
	case "message_start":
		if m := e.Message; m != nil {
			info.id, info.model = m.ID, m.Model
			if m.StopReason != "" {
				info.stop = m.StopReason
			}
			a.mergeUsage(m.Usage)
		}
	case "content_block_start":
		cb := e.ContentBlock
		if cb == nil || len(a.blocks) >= maxBlocks {
			return
		}
		b := &anthropicBlock{typ: cb.Type}
		a.blocks[e.Index] = b
		switch cb.Type {
		case "text":
			info.text.sep()
			info.text.addString(cb.Text)
		case "thinking":
			info.thinking.sep()
			info.thinking.addString(cb.Thinking)
		case "tool_use", "server_tool_use", "mcp_tool_use":
			b.call = info.newCall(cb.ID, cb.Name, cb.Type == "mcp_tool_use")
			b.input = compactJSON(cb.Input)
		}
	case "content_block_delta":
		d := e.Delta
		if d == nil {
			return
		}
		switch d.Type {
		case "text_delta":
			info.text.addString(d.Text)
		case "thinking_delta":
			info.thinking.addString(d.Thinking)
		case "input_json_delta":
			if b := a.blocks[e.Index]; b != nil && b.call != nil {
				b.call.addArgs(d.PartialJSON)
			}
		}
	case "content_block_stop":
		if b := a.blocks[e.Index]; b != nil {
			b.finishCall()
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			info.stop = e.Delta.StopReason
		}
		a.mergeUsage(e.Usage)
	case "error":
		if e.Error != nil {
			info.errType = e.Error.Type
		}
	}
}

// finishCall gives a tool call that streamed no input the input its block
// started with.
func (b *anthropicBlock) finishCall() {
	if b.call != nil && len(b.call.args) == 0 && len(b.input) > 0 {
		b.call.setArgs(string(b.input))
	}
}

// mergeUsage folds a usage object into the merged one: message_delta
// carries cumulative counts that replace those of message_start.
func (a *anthropicResponse) mergeUsage(raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	for k, v := range m {
		if string(v) != "null" {
			a.usage[k] = v
		}
	}
}

func (a *anthropicResponse) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	info := a.info
	switch s.Depth() {
	case 1:
		if !info.top(s, k, 0, anthropicOpenAITop) && s.At(0, "stop_reason") {
			s.SetString(k, &info.stop)
		}
	case 2:
		switch {
		case s.At(0, "content", "#"):
			switch k {
			case jsonscan.ObjStart:
				a.blk = anthropicBlock{text: capText{max: info.opts.PreviewBytes}}
			case jsonscan.ObjEnd:
				a.commitBlock()
			}
		case s.At(0, "error", "type"):
			s.SetString(k, &info.errType)
		}
	case 3:
		b := &a.blk
		switch {
		case s.At(0, "content", "#", "type"):
			s.SetString(k, &b.typ)
		case s.At(0, "content", "#", "id"):
			s.SetString(k, &b.id)
		case s.At(0, "content", "#", "name"):
			s.SetString(k, &b.name)
		case s.At(0, "content", "#", "text"), s.At(0, "content", "#", "thinking"):
			if k == jsonscan.String {
				b.text.add(s.Str())
			}
		case s.At(0, "content", "#", "input"):
			switch k {
			case jsonscan.ObjStart, jsonscan.ArrStart:
				s.Capture(info.opts.MaxToolArgBytes)
			case jsonscan.ObjEnd, jsonscan.ArrEnd:
				c, _ := s.Captured()
				b.input = copyBytes(c)
			}
		}
	}
}

func (a *anthropicResponse) commitBlock() {
	b := &a.blk
	info := a.info
	switch b.typ {
	case "text":
		info.text.sep()
		info.text.add(b.text.b)
	case "thinking":
		info.thinking.sep()
		info.thinking.add(b.text.b)
	case "tool_use", "server_tool_use", "mcp_tool_use":
		t := info.newCall(b.id, b.name, b.typ == "mcp_tool_use")
		t.setArgs(string(b.input))
	}
}

func (a *anthropicResponse) done() {
	// Blocks cut off before their stop event.
	idx := make([]int, 0, len(a.blocks))
	for i := range a.blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		a.blocks[i].finishCall()
	}
	if len(a.usage) > 0 {
		if b, err := json.Marshal(a.usage); err == nil {
			a.info.usage = b
		}
	}
}

func compactJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return nil
	}
	return buf.Bytes()
}
