package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"

	"github.com/capsem/capsem/ask"

	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/internal/contentcoding"
	"github.com/capsem/capsem/mitm/internal/mcpscan"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// MaxHold is the largest request body held to decide its tools/calls
// before a byte is forwarded. JSON-RPC requests are small (a tools/call's
// arguments); one larger than this, to a host with deny rules, is refused
// rather than forwarded undecided.
const MaxHold = 4 << 20

// decide holds the request body of an MCP candidate to a host that
// [[mcp.rules]] may deny tools of, parses it whole, and refuses the
// request when a tools/call in it is denied. It returns false when it
// answered the guest itself.
func (v *view) decide(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	if ce := contentcoding.Of(r.Header); contentcoding.IsCoded(ce) {
		// What capsem decodes to decide (64 MiB at most, known codings
		// only) might not be all the server decodes; MCP clients do not
		// compress their requests.
		v.x.Refuse(http.StatusUnsupportedMediaType, policy.ReasonMCPToolDenied,
			"a request body with Content-Encoding "+ce+" to a host with [[mcp.rules]] deny entries",
			"capsem decides the MCP requests to this host before forwarding them, and reads only uncompressed bodies for that. Send the body uncompressed.")
		return false
	}
	held, err := v.x.HoldBody(r, MaxHold)
	v.x.EndTap() // the parser has seen all it will: the decision is made on it
	if errors.Is(err, inspect.ErrAnswered) {
		return false
	}
	if err != nil {
		v.x.Refuse(http.StatusBadRequest, policy.ReasonMCPToolDenied, "reading the request body: "+err.Error(),
			"capsem decides an MCP request to this host before forwarding it, and could not read this one whole.")
		return false
	}
	body := held.Bytes()
	if held.Over() {
		if !mayBeJSON(body) {
			// Not JSON, so no JSON-RPC for a server to act on: forward
			// it whole.
			r.Body = readCloser{held, r.Body}
			return true
		}
		v.x.Refuse(http.StatusRequestEntityTooLarge, policy.ReasonMCPToolDenied,
			fmt.Sprintf("an MCP request body over %d bytes to a host with [[mcp.rules]] deny entries", MaxHold),
			"capsem reads an MCP request to this host whole to decide its tool calls before forwarding it. Send smaller requests.")
		return false
	}
	if !v.body.Whole() && mayBeJSON(body) {
		v.x.Refuse(http.StatusBadRequest, policy.ReasonMCPToolDenied, "a request body capsem could not read as JSON to its end, to a host with [[mcp.rules]] deny entries",
			"capsem decides the MCP requests to this host before forwarding them, and could not read this body (a byte-order mark, UTF-16, NaN, "+
				"nesting deeper than 256, or a value left open) though a server's JSON parser might. Send MCP requests as plain UTF-8 JSON-RPC 2.0.")
		return false
	}
	if v.body.Suspect() {
		v.x.Refuse(http.StatusBadRequest, policy.ReasonMCPToolDenied, "an object with a method that is not JSON-RPC 2.0, to a host with [[mcp.rules]] deny entries",
			"capsem decides the MCP requests to this host before forwarding them, and a server might act on this one as a request "+
				"though it lacks \"jsonrpc\": \"2.0\". Send MCP requests as JSON-RPC 2.0.")
		return false
	}
	r.Body = readCloser{held, r.Body}
	v.mu.Lock()
	calls := append([]*mcpCall(nil), v.calls...)
	v.batch = len(bytes.TrimLeft(body, " \t\r\n")) > 0 && bytes.TrimLeft(body, " \t\r\n")[0] == '['
	v.mu.Unlock()
	// The calls the policy left to a person are asked now, before the
	// body goes: the answer decides them.
	for _, c := range calls {
		if !c.ask {
			continue
		}
		d := v.in.asks.Settle(r.Context(), ask.MCP(v.host, c.rec.ToolName), v.pol.MCPAskTimeout(), policy.Decision{Reason: c.rec.Reason, Ask: true})
		v.mu.Lock()
		c.rec.Decision, c.rec.Reason, c.rec.MatchedRule = store.Denied, d.Reason, d.Rule
		if d.Allowed {
			c.rec.Decision = store.Allowed
			v.t.wait(v.sess, c.rec.RequestID, c) // its response ends it, as an allowed call's does
		}
		v.mu.Unlock()
	}
	var denied *mcpCall
	for _, c := range calls {
		if c.rec.Decision == store.Denied {
			denied = c
			break
		}
	}
	if denied == nil {
		return true
	}
	v.refuse(calls, denied)
	return false
}

// mayBeJSON reports whether a body may be read as JSON by some server's
// parser: it opens an object or a batch anywhere (lenient parsers skip a
// comment, a "#" line or an anti-hijacking prefix such as )]}' before the
// value: Gson, JSON5, Jackson with comments allowed), or it starts a
// byte-order mark or UTF-16 (0xEF, 0xFE, 0xFF, NUL).
func mayBeJSON(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 {
		return false
	}
	switch b[0] {
	case 0xEF, 0xFE, 0xFF, 0:
		return true
	}
	return bytes.ContainsAny(b, "{[")
}

// refuse answers every request of the body with a JSON-RPC error, in the
// form the guest's transport reads: on the HTTP+SSE stream of the session
// (the POST gets 202), or as the POST's JSON response. A request sent in
// one batch with a denied one is refused with it: capsem forwards a body
// whole or not at all.
func (v *view) refuse(calls []*mcpCall, denied *mcpCall) {
	d := policy.Decision{Rule: denied.rec.MatchedRule, Reason: denied.rec.Reason}
	var msgs [][]byte
	for _, c := range calls {
		v.t.claimIf(v.sess, c.rec.RequestID, c) // allowed ones waited: they are answered here
		msg := policy.MCPRefusal(c.rec.Method, c.rec.ToolName, d)
		if c != denied && c.rec.Decision != store.Denied {
			msg = fmt.Sprintf("capsem: %s refused: it was sent in one batch with %s, which the policy refuses (%s). Send it again on its own.",
				c.rec.Method, denied.rec.ToolName, d.Rule)
			c.rec.Decision, c.rec.Reason, c.rec.MatchedRule = store.Denied, d.Reason, d.Rule
		}
		e := mcpscan.ErrorResponse(c.rec.RequestID, policy.MCPRefusalCode, msg)
		c.rec.ErrorMessage = msg
		c.rec.ResponsePreview = string(e)
		c.rec.BytesReceived = int64(len(e)) // capsem's answer is the response the guest got
		msgs = append(msgs, e)
	}
	a := inspect.Answer{Reason: policy.ReasonMCPToolDenied, Rule: d.Rule,
		Why: fmt.Sprintf("MCP tools/call of %q refused by %s", denied.rec.ToolName, d.Rule)}
	notSent := 0
	if s := v.t.streamOf(v.sess); s != nil && !v.own {
		for _, m := range msgs {
			if !s.inject(mcpscan.FormatEvent("message", m)) {
				notSent++
			}
		}
		a.Status, a.ContentType, a.Body = http.StatusAccepted, "text/plain; charset=utf-8", []byte("Accepted")
		a.Preview = "Accepted (the refusal went on the session's event stream)"
	} else {
		var out []byte
		if v.batch || len(msgs) > 1 {
			out = append([]byte("["), bytes.Join(msgs, []byte(","))...)
			out = append(out, ']')
		} else if len(msgs) == 1 {
			out = msgs[0]
		}
		a.Status, a.ContentType, a.Body = http.StatusOK, "application/json", out
	}
	v.x.Answer(a)
	for range notSent {
		v.x.Note("a refusal was not sent on the session's event stream: the guest has not read what is waiting there")
	}
	for _, c := range calls {
		c.rec.Duration = 0
		v.in.record(c)
	}
}
