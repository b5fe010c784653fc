package provider

import (
	"github.com/capsem/capsem/mitm/sse"
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

func (g *geminiRequest) tok(s *scanner, k tokKind) {
	switch s.depth() {
	case 2:
		switch {
		case s.at(0, "contents", "#"):
			g.msg.tok(g.info, k, "model")
		case s.at(0, "tools", "#"):
			switch k {
			case tokObjStart:
				g.hasDecls = false
			case tokObjEnd:
				if !g.hasDecls {
					g.info.tools++
				}
			}
		}
	case 3:
		if s.at(0, "contents", "#", "role") {
			s.setString(k, &g.msg.role)
		}
	case 4:
		switch {
		case s.at(0, "systemInstruction", "parts", "#", "text"):
			if k == tokString {
				g.info.system.sep()
				g.info.system.add(s.str)
			}
		case s.at(0, "tools", "#", "functionDeclarations", "#"):
			if isValueStart(k) {
				g.info.tools++
				g.hasDecls = true
			}
		}
	case 5:
		if s.at(0, "contents", "#", "parts", "#", "functionResponse") {
			switch k {
			case tokObjStart:
				g.fr.name, g.fr.preview, g.fr.isErr = "", "", false
				g.frOpen = true
			case tokObjEnd:
				g.frOpen = false
				g.info.addResult(store.ToolResult{CallID: g.fr.name, ContentPreview: g.fr.preview, IsError: g.fr.isErr})
			}
		}
	case 6:
		switch {
		case s.at(0, "contents", "#", "parts", "#", "functionResponse", "name"):
			s.setString(k, &g.fr.name)
		case s.at(0, "contents", "#", "parts", "#", "functionResponse", "response"):
			switch k {
			case tokObjStart, tokArrStart:
				s.capture(g.opts.PreviewBytes)
			case tokObjEnd, tokArrEnd:
				b, _ := s.captured()
				g.fr.preview = string(cutRune(b))
			}
		}
	case 7:
		if s.at(0, "contents", "#", "parts", "#", "functionResponse", "response", "error") && isValueStart(k) {
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
	sc   *scanner // for the data of server-sent events
	base int      // depth of the response object: 1 inside a JSON array

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
		g.sc = newScanner(g.info.opts.PreviewBytes, func(s *scanner, k tokKind) { g.tok(s, k) })
		g.sc.camelKeys = true
	}
	g.sc.reset()
	g.base = 0
	g.sc.Write([]byte(ev.Data))
	g.sc.close()
}

func (g *geminiResponse) tok(s *scanner, k tokKind) {
	if s.depth() == 0 {
		if k == tokArrStart {
			g.base = 1
		}
		return
	}
	b := g.base
	if s.depth() == b {
		return
	}
	info := g.info
	if s.depth() == b+1 {
		info.top(s, k, b, geminiTop)
		return
	}
	if s.at(b, "error", "status") || s.at(b, "error", "code") {
		switch k {
		case tokString:
			info.errType = string(s.str)
		case tokNumber:
			if info.errType == "" {
				info.errType = string(s.num)
			}
		}
		return
	}
	if !s.hasPrefix(b, "candidates", "#") || s.index(b+1) != 0 {
		return
	}
	p := &g.part
	switch {
	case s.at(b, "candidates", "#", "finishReason"):
		s.setString(k, &info.stop)
	case s.at(b, "candidates", "#", "content", "parts", "#"):
		switch k {
		case tokObjStart:
			p.text.reset()
			p.thought, p.call, p.hasArgs = false, false, false
			p.name, p.args = "", p.args[:0]
		case tokObjEnd:
			g.endPart()
		}
	case s.at(b, "candidates", "#", "content", "parts", "#", "text"):
		if k == tokString {
			p.text.add(s.str)
		}
	case s.at(b, "candidates", "#", "content", "parts", "#", "thought"):
		p.thought = k == tokTrue
	case s.at(b, "candidates", "#", "content", "parts", "#", "functionCall"):
		if k == tokObjStart {
			p.call = true
		}
	case s.at(b, "candidates", "#", "content", "parts", "#", "functionCall", "name"):
		s.setString(k, &p.name)
	case s.at(b, "candidates", "#", "content", "parts", "#", "functionCall", "args"):
		switch k {
		case tokObjStart, tokArrStart:
			s.capture(info.opts.MaxToolArgBytes)
		case tokObjEnd, tokArrEnd:
			c, _ := s.captured()
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
