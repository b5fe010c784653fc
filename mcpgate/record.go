package mcpgate

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reasonAllowed is the reason of a call no rule refused.
const reasonAllowed = "allowed"

// record records c, its guest- and server-controlled fields capped (n is
// the preview size, the cap of error_message).
func (g *Gateway) record(c *store.MCPCall, n int) {
	capRecord(c, n)
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

// previewBytes is the preview size of a call decided by d: its policy's
// [http] preview_bytes when it has one (*policy.Policy does, and a reload
// may change it), else Config.PreviewBytes.
func (g *Gateway) previewBytes(d Decider) int {
	if p, ok := d.(interface{ PreviewBytes() int }); ok {
		if n := p.PreviewBytes(); n > 0 {
			return n
		}
	}
	return g.cfg.PreviewBytes
}

// finish fills c's response side from what the guest gets: res or err; n
// is the preview size.
func (g *Gateway) finish(c *store.MCPCall, start time.Time, res mcp.Result, err error, n int) {
	c.Duration = time.Since(start)
	if err != nil {
		werr := wireError(err)
		b, _ := json.Marshal(werr)
		c.ResponsePreview = preview(b, n)
		c.BytesReceived = int64(len(b))
		c.ErrorMessage = werr.Message
		var h *hostDetailError
		var w *jsonrpc.Error
		switch {
		case errors.As(err, &h): // the record is the host's: all of it
			c.ErrorMessage = capText(h.Error(), n)
		case !errors.As(err, &w) || w.Code == codeRejected:
			// capsem's own failure, or the transport's under the SDK's
			// "rejected by transport": the whole of it, URLs the
			// guest's text leaves out included.
			c.ErrorMessage = capText(err.Error(), n)
		}
		return
	}
	if res == nil {
		return
	}
	b, _ := json.Marshal(res)
	c.ResponsePreview = preview(b, n)
	c.BytesReceived = int64(len(b))
	if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
		// Joined up to the cap only: the text can be as long as the
		// server likes.
		var sb strings.Builder
		for _, ct := range r.Content {
			t, ok := ct.(*mcp.TextContent)
			if !ok || sb.Len() > n {
				continue
			}
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(t.Text[:min(len(t.Text), n+utf8.UTFMax)])
		}
		c.ErrorMessage = capText(sb.String(), n)
		if c.ErrorMessage == "" {
			c.ErrorMessage = "the tool reported an error (isError) without text"
		}
	}
}

// wireError is the JSON-RPC error the guest gets for err: the server's own
// when it answered one, capsem's refusal, or an internal error naming what
// failed.
func wireError(err error) *jsonrpc.Error {
	var h *hostDetailError
	if errors.As(err, &h) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: h.guest}
	}
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		// The SDK client wraps the server's error ("calling ...: <msg>");
		// the guest gets the server's own, code and data included.
		return w
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: withoutURLs(err.Error())}
}

// codeRejected is the code of the SDK's "rejected by transport" (its
// internal jsonrpc2.ErrRejected), under which it wraps a request that never
// reached the server.
const codeRejected = -32005

// urlText is a URL as error texts hold one: Go's HTTP client names the
// request's ("Get \"https://…\": dial tcp …"), and the SDK words a lost
// session with it.
var urlText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]*`)

// withoutURLs is an error text for the guest: a remote server's URL may
// hold a token in its path or query, and stays on the host's record.
func withoutURLs(s string) string {
	return urlText.ReplaceAllLiteralString(s, "(the server's URL, in capsem's record on the host)")
}

// hostDetailError is an error whose whole text is for the host (the log,
// the record) and whose guest text leaves the host's out: a server's
// stderr tail, its exit, a remote URL (which may hold a token) stay on the
// host side, where the guest could otherwise crash a server on purpose and
// read the secrets it complains about.
type hostDetailError struct {
	host  error
	guest string
}

func (e *hostDetailError) Error() string { return e.host.Error() }
func (e *hostDetailError) Unwrap() error { return e.host }
