package provider

import (
	"github.com/capsem/capsem/mitm/internal/jsonscan"
	"github.com/capsem/capsem/mitm/internal/sse"
	"github.com/capsem/capsem/store"
)

// Gemini API: POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent (with alt=sse, server-sent events; without, one
// JSON array of responses). https://ai.google.dev/api/generate-content
//
// The API is protobuf JSON, which accepts snake_case field names as well as
// lowerCamelCase; the scanner rewrites keys to lowerCamelCase for it.
//
// Gemini's function calls and responses carry no ids that clients reliably
// send back, so the function's name is the call id on both sides.

// geminiRequest reads a GenerateContentRequest: contents (role "model"
// turns are the model's), systemInstruction, tools (each function
// declaration counts, and each other tool such as googleSearch counts one),
// and the functionResponse parts after the last model turn.
type geminiRequest struct {
	info *requestInfo
	opts Options

	msg turn
	fr  struct {
		name, preview string
		isErr         bool
	}
	hasDecls bool
	frOpen   bool
}

func (g *geminiRequest) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	switch s.Depth() {
	case 2:
		switch {
		case s.At(0, "contents", "#"):
			g.msg.tok(g.info, k, "model")
		case s.At(0, "tools", "#"):
			switch k {
			case jsonscan.ObjStart:
				g.hasDecls = false
			case jsonscan.ObjEnd:
				if !g.hasDecls {
					g.info.tools++
				}
			}
		}
	case 3:
		if s.At(0, "contents", "#", "role") {
			s.SetString(k, &g.msg.role)
		}
	case 4:
		switch {
		case s.At(0, "systemInstruction", "parts", "#", "text"):
			if k == jsonscan.String {
				g.info.system.sep()
				g.info.system.add(s.Str())
			}
		case s.At(0, "tools", "#", "functionDeclarations", "#"):
			if isValueStart(k) {
				g.info.tools++
				g.hasDecls = true
			}
		}
	case 5:
		if s.At(0, "contents", "#", "parts", "#", "functionResponse") {
			switch k {
			case jsonscan.ObjStart:
				g.fr.name, g.fr.preview, g.fr.isErr = "", "", false
				g.frOpen = true
			case jsonscan.ObjEnd:
				g.frOpen = false
				g.info.addResult(store.ToolResult{CallID: g.fr.name, ContentPreview: g.fr.preview, IsError: g.fr.isErr})
			}
		}
	case 6:
		switch {
		case s.At(0, "contents", "#", "parts", "#", "functionResponse", "name"):
			s.SetString(k, &g.fr.name)
		case s.At(0, "contents", "#", "parts", "#", "functionResponse", "response"):
			switch k {
			case jsonscan.ObjStart, jsonscan.ArrStart:
				s.Capture(g.opts.PreviewBytes)
			case jsonscan.ObjEnd, jsonscan.ArrEnd:
				b, _ := s.Captured()
				g.fr.preview = string(jsonscan.CutRune(b))
			}
		}
	case 7:
		if s.At(0, "contents", "#", "parts", "#", "functionResponse", "response", "error") && isValueStart(k) {
			g.fr.isErr = true
		}
	}
}

// done keeps what a body cut short had begun.
func (g *geminiRequest) done() {
	if g.frOpen {
		g.info.addResult(store.ToolResult{CallID: g.fr.name, ContentPreview: g.fr.preview, IsError: g.fr.isErr})
	}
	g.msg.done(g.info, "model")
}

// geminiResponse reads GenerateContentResponse objects: the body of
// generateContent, each element of streamGenerateContent's JSON array, or
// each server-sent event's data. Only the first candidate is read.
type geminiResponse struct {
	info *responseInfo
	sc   *jsonscan.Scanner // for the data of server-sent events
	base int               // depth of the response object: 1 inside a JSON array

	part struct {
		text    capText
		thought bool
		call    bool
		name    string
		args    []byte
		hasArgs bool
	}
}

func newGeminiResponse(info *responseInfo) *geminiResponse {
	g := &geminiResponse{info: info}
	g.part.text.max = info.opts.PreviewBytes
	return g
}

func (g *geminiResponse) event(ev sse.Event) {
	if g.sc == nil {
		g.sc = jsonscan.New(g.info.opts.PreviewBytes, func(s *jsonscan.Scanner, k jsonscan.Kind) { g.tok(s, k) })
		g.sc.CamelKeys(true)
	}
	g.sc.Reset()
	g.base = 0
	g.sc.Write([]byte(ev.Data))
	g.sc.Close()
}

func (g *geminiResponse) tok(s *jsonscan.Scanner, k jsonscan.Kind) {
	if s.Depth() == 0 {
		if k == jsonscan.ArrStart {
			g.base = 1
		}
		return
	}
	b := g.base
	if s.Depth() == b {
		return
	}
	info := g.info
	if s.Depth() == b+1 {
		info.top(s, k, b, geminiTop)
		return
	}
	if s.At(b, "error", "status") || s.At(b, "error", "code") {
		switch k {
		case jsonscan.String:
			info.errType = string(s.Str())
		case jsonscan.Number:
			if info.errType == "" {
				info.errType = string(s.Num())
			}
		}
		return
	}
	if !s.HasPrefix(b, "candidates", "#") || s.Index(b+1) != 0 {
		return
	}
	p := &g.part
	switch {
	case s.At(b, "candidates", "#", "finishReason"):
		s.SetString(k, &info.stop)
	case s.At(b, "candidates", "#", "content", "parts", "#"):
		switch k {
		case jsonscan.ObjStart:
			p.text.reset()
			p.thought, p.call, p.hasArgs = false, false, false
			p.name, p.args = "", p.args[:0]
		case jsonscan.ObjEnd:
			g.endPart()
		}
	case s.At(b, "candidates", "#", "content", "parts", "#", "text"):
		if k == jsonscan.String {
			p.text.add(s.Str())
		}
	case s.At(b, "candidates", "#", "content", "parts", "#", "thought"):
		p.thought = k == jsonscan.True
	case s.At(b, "candidates", "#", "content", "parts", "#", "functionCall"):
		if k == jsonscan.ObjStart {
			p.call = true
		}
	case s.At(b, "candidates", "#", "content", "parts", "#", "functionCall", "name"):
		s.SetString(k, &p.name)
	case s.At(b, "candidates", "#", "content", "parts", "#", "functionCall", "args"):
		switch k {
		case jsonscan.ObjStart, jsonscan.ArrStart:
			s.Capture(info.opts.MaxToolArgBytes)
		case jsonscan.ObjEnd, jsonscan.ArrEnd:
			c, _ := s.Captured()
			p.args = append(p.args[:0], c...)
			p.hasArgs = true
		}
	}
}

func (g *geminiResponse) endPart() {
	p := &g.part
	info := g.info
	switch {
	case p.call:
		t := info.newCall(p.name, p.name, false)
		if p.hasArgs {
			t.setArgs(string(p.args))
		} else {
			t.setArgs("{}")
		}
	case p.thought:
		info.thinking.add(p.text.b)
	default:
		info.text.add(p.text.b)
	}
}

func (g *geminiResponse) done() {}
