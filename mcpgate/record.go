package mcpgate

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reasonAllowed is the reason of a call no rule refused.
const reasonAllowed = "allowed"

func (g *Gateway) record(c *store.MCPCall) {
	if g.cfg.Recorder != nil {
		g.cfg.Recorder.Append(store.Event{Kind: store.KindMCPCall, MCPCall: c})
	}
}

// preview caps the compact JSON b at n bytes, on a rune boundary.
func preview(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	b = b[:n]
	for len(b) > 0 && !utf8.Valid(b[max(0, len(b)-utf8.UTFMax):]) {
		b = b[:len(b)-1]
	}
	return string(b)
}

// finish fills c's response side from what the guest gets: res or err.
func (g *Gateway) finish(c *store.MCPCall, start time.Time, res mcp.Result, err error) {
	c.Duration = time.Since(start)
	if err != nil {
		werr := wireError(err)
		b, _ := json.Marshal(werr)
		c.ResponsePreview = preview(b, g.cfg.PreviewBytes)
		c.BytesReceived = int64(len(b))
		c.ErrorMessage = werr.Message
		return
	}
	if res == nil {
		return
	}
	b, _ := json.Marshal(res)
	c.ResponsePreview = preview(b, g.cfg.PreviewBytes)
	c.BytesReceived = int64(len(b))
	if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
		var texts []string
		for _, ct := range r.Content {
			if t, ok := ct.(*mcp.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		c.ErrorMessage = strings.Join(texts, "\n")
		if c.ErrorMessage == "" {
			c.ErrorMessage = "the tool reported an error (isError) without text"
		}
	}
}

// wireError is the JSON-RPC error the guest gets for err: the server's own
// when it answered one, capsem's refusal, or an internal error naming what
// failed.
func wireError(err error) *jsonrpc.Error {
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		// The SDK client wraps the server's error ("calling ...: <msg>");
		// the guest gets the server's own, code and data included.
		return w
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}
