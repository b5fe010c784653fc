package provider

import "github.com/capsem/capsem/mitm/internal/jsonscan"

// capText collects text up to a cap. A cut never splits a UTF-8 sequence.
type capText struct {
	b      []byte
	max    int
	trunc  bool
	pndSep bool // a block ended: the next text starts on a new line
}

func (c *capText) add(s []byte) { addText(c, s) }

func (c *capText) addString(s string) { addText(c, s) }

func addText[T string | []byte](c *capText, s T) {
	if c.trunc || len(s) == 0 {
		return
	}
	if c.pndSep {
		c.pndSep = false
		put(c, "\n")
	}
	put(c, s)
}

func put[T string | []byte](c *capText, s T) {
	if c.trunc {
		return
	}
	room := c.max - len(c.b)
	if len(s) > room {
		c.b = append(c.b, s[:max(room, 0)]...)
		c.b = jsonscan.CutRune(c.b)
		c.trunc = true
		return
	}
	c.b = append(c.b, s...)
}

// sep marks the end of a block: text added next starts on a new line,
// unless the text is empty so far.
func (c *capText) sep() { c.pndSep = len(c.b) > 0 }

func (c *capText) String() string { return string(c.b) }

func (c *capText) reset() {
	c.b = c.b[:0]
	c.trunc = false
	c.pndSep = false
}

// toolAcc assembles one tool call.
type toolAcc struct {
	id, name, origin string
	args             []byte
	max              int
	trunc            bool
	argsDone         bool // args hold the final value: ignore further deltas
}

func (t *toolAcc) addArgs(s string) {
	if t.argsDone || t.trunc {
		return
	}
	room := t.max - len(t.args)
	if len(s) > room {
		t.args = append(t.args, s[:max(room, 0)]...)
		t.trunc = true
		return
	}
	t.args = append(t.args, s...)
}

// setArgs replaces the arguments with their final value.
func (t *toolAcc) setArgs(s string) {
	t.args, t.trunc, t.argsDone = t.args[:0], false, false
	t.addArgs(s)
	t.argsDone = true
}

// origin says whether a tool is served over MCP: Anthropic's MCP connector
// and OpenAI's remote MCP tools have their own item types, and clients such
// as Claude Code name MCP tools "mcp__server__tool".
func origin(name string, mcp bool) string {
	if mcp || len(name) > 5 && name[:5] == "mcp__" {
		return "mcp"
	}
	return "native"
}
