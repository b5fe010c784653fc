package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/capsem/capsem/ask"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// forwarded are the methods the gateway answers from the backend (and
// records); every other method is the SDK server's own (logging/setLevel,
// notifications/initialized, notifications/cancelled, …).
var forwarded = map[string]bool{
	"initialize":               true,
	"ping":                     true,
	"tools/list":               true,
	"tools/call":               true,
	"resources/list":           true,
	"resources/templates/list": true,
	"resources/read":           true,
	"prompts/list":             true,
	"prompts/get":              true,
	"completion/complete":      true,
}

// reasonNoPolicy is the reason of a tools/call refused because Serve was
// given no Decider (the gateway fails closed).
const reasonNoPolicy = "mcp-no-policy"

// middleware is the guest-facing SDK server's receiving middleware: it
// answers the forwarded methods from the backend.
func (e *entry) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !forwarded[method] {
			return e.local(ctx, method, req, next)
		}
		return e.proxy(ctx, method, req, next)
	}
}

// local answers a method the SDK server answers itself (a notification,
// logging/setLevel, resources/subscribe, …) and records it like any call:
// every message of the guest's is one mcp_call.
func (e *entry) local(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	start := time.Now()
	g := e.g
	c := &store.MCPCall{ServerName: e.name, Method: method, Decision: store.Allowed, Reason: reasonAllowed}
	info := g.callOf(req)
	var d Decider
	if info != nil {
		c.RequestID, c.BytesSent, d = info.id, info.bytes, info.decider
	}
	n := g.previewBytes(d)
	c.RequestPreview = paramsPreview(c, req.GetParams(), n)
	res, err := next(ctx, method, req)
	g.finish(c, start, res, err, n)
	g.record(c, n)
	return res, err
}

// callOf is what Serve knew of req's POST; nil if none.
func (g *Gateway) callOf(req mcp.Request) *callInfo {
	if x := req.GetExtra(); x != nil && x.Header != nil {
		return g.calls.get(x.Header.Get(callHeader))
	}
	return nil
}

// paramsPreview is the preview of params, compact JSON cut at n. Encoding
// is the one way to it (the SDK has decoded the guest's message); it also
// counts c.BytesSent when Serve did not (a message that came on no POST
// of its).
func paramsPreview(c *store.MCPCall, params mcp.Params, n int) string {
	b, err := json.Marshal(params)
	if err != nil || string(b) == "null" {
		return ""
	}
	if c.BytesSent == 0 {
		c.BytesSent = int64(len(b))
	}
	return preview(b, n)
}

func (e *entry) proxy(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	start := time.Now()
	g := e.g
	info := g.callOf(req)
	c := &store.MCPCall{ServerName: e.name, Method: method, Decision: store.Allowed, Reason: reasonAllowed}
	var d Decider
	if info != nil {
		// The whole message the guest sent, as the MITM counts it.
		c.RequestID, c.BytesSent, d = info.id, info.bytes, info.decider
		// The call ends when its POST does: the SDK would run it on after
		// the guest abandoned it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(info.ctx, cancel)()
	}
	n := g.previewBytes(d)
	params := req.GetParams()
	c.RequestPreview = paramsPreview(c, params, n)
	if p, ok := params.(*mcp.CallToolParamsRaw); ok {
		c.ToolName = p.Name
		dec := policy.Decision{Reason: reasonNoPolicy}
		if d != nil {
			dec = d.DecideMCPTool(e.name, p.Name)
			dec = g.cfg.Asks.Settle(ctx, ask.MCP(e.name, p.Name), d.MCPAskTimeout(), dec)
		}
		if !dec.Allowed {
			c.Decision, c.Reason, c.MatchedRule = store.Denied, dec.Reason, dec.Rule
			err := &jsonrpc.Error{Code: policy.MCPRefusalCode, Message: policy.MCPRefusal(method, p.Name, dec)}
			g.finish(c, start, nil, err, n)
			g.record(c, n)
			return nil, err
		}
		c.MatchedRule = dec.Rule
		if dec.Reason != "" {
			c.Reason = dec.Reason // asked-allowed, when a person allowed it
		}
	}
	res, err := e.forward(ctx, method, req, next, d)
	g.finish(c, start, res, err, n)
	g.record(c, n)
	if err != nil {
		return nil, wireError(err)
	}
	return res, nil
}

// forward answers one request from the backend.
func (e *entry) forward(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler, d Decider) (mcp.Result, error) {
	cs, err := e.backend().session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := e.call(ctx, cs, method, req, next, d)
	if err != nil {
		var w *jsonrpc.Error
		if !errors.As(err, &w) {
			err = fmt.Errorf("mcpgate: MCP server %q: %v (capsem starts it again on the next call if it died)", e.name, err)
		}
	}
	return res, err
}

func (e *entry) call(ctx context.Context, cs *mcp.ClientSession, method string, req mcp.Request, next mcp.MethodHandler, d Decider) (mcp.Result, error) {
	switch p := req.GetParams().(type) {
	case *mcp.InitializeParams:
		// The SDK server negotiates the guest's protocol version and
		// keeps the session's state; the guest sees the backend.
		res, err := next(ctx, method, req)
		if err != nil {
			return nil, err
		}
		ir, ok := res.(*mcp.InitializeResult)
		if !ok {
			return res, nil
		}
		bi := cs.InitializeResult()
		if bi == nil {
			return res, nil
		}
		out := *ir
		out.Capabilities = guestCapabilities(bi.Capabilities)
		out.ServerInfo = bi.ServerInfo
		out.Instructions = bi.Instructions
		return &out, nil
	case *mcp.PingParams:
		if err := cs.Ping(ctx, p); err != nil {
			return nil, err
		}
		return next(ctx, method, req)
	case *mcp.ListToolsParams:
		res, err := cs.ListTools(ctx, p)
		if err != nil {
			return nil, err
		}
		if d == nil {
			// No policy to ask: every tools/call is refused, so none is
			// listed (fail closed, as hide_denied would).
			out := *res
			out.Tools = []*mcp.Tool{}
			return &out, nil
		}
		if d.MCPHideDenied() {
			out := *res
			out.Tools = slices.DeleteFunc(slices.Clone(res.Tools), func(t *mcp.Tool) bool {
				dec := d.DecideMCPTool(e.name, t.Name)
				return !dec.Allowed && !dec.Ask // a tool a person may allow is listed
			})
			return &out, nil
		}
		return res, nil
	case *mcp.CallToolParamsRaw:
		var args any
		if len(p.Arguments) > 0 {
			args = p.Arguments
		}
		return cs.CallTool(ctx, &mcp.CallToolParams{
			Meta: p.Meta, Name: p.Name, Arguments: args,
			InputResponses: p.InputResponses, RequestState: p.RequestState,
		})
	case *mcp.ListResourcesParams:
		return cs.ListResources(ctx, p)
	case *mcp.ListResourceTemplatesParams:
		return cs.ListResourceTemplates(ctx, p)
	case *mcp.ReadResourceParams:
		return cs.ReadResource(ctx, p)
	case *mcp.ListPromptsParams:
		return cs.ListPrompts(ctx, p)
	case *mcp.GetPromptParams:
		return cs.GetPrompt(ctx, p)
	case *mcp.CompleteParams:
		return cs.Complete(ctx, p)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("mcpgate: %s is not forwarded by capsem's MCP gateway", method)}
}

// guestCapabilities are the backend's capabilities less what the gateway
// does not forward: resource subscriptions and log messages.
func guestCapabilities(c *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	if c == nil {
		return &mcp.ServerCapabilities{}
	}
	out := *c
	out.Logging = nil
	if c.Resources != nil {
		r := *c.Resources
		r.Subscribe = false
		out.Resources = &r
	}
	return &out
}
