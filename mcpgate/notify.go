package mcpgate

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type listKind int

const (
	listTools listKind = iota
	listPrompts
	listResources
)

// placeholder names the tool, prompt and resource the gateway adds to and
// removes from its guest-facing SDK server to have the SDK send a
// list_changed notification to the guest sessions (the SDK has no call to
// send one); guests never see them, since every list is the backend's.
const (
	placeholder    = "capsem-mcpgate-list-changed"
	placeholderURI = "capsem-mcpgate:list-changed"
)

var placeholderSchema = json.RawMessage(`{"type":"object"}`)

var errPlaceholder = errors.New("mcpgate: placeholder, never served")

// listChanged forwards a backend's list_changed notification to the guest
// sessions of e, and records it.
func (e *entry) listChanged(k listKind, params mcp.Params) {
	c := &store.MCPCall{ServerName: e.name, Decision: store.Allowed, Reason: reasonAllowed}
	// The server sent it: its size counts as received, as the MITM counts
	// a server's message.
	if params != nil {
		if b, err := json.Marshal(params); err == nil && string(b) != "null" {
			c.RequestPreview = preview(b, e.g.cfg.PreviewBytes)
			c.BytesReceived = int64(len(b))
		}
	}
	// The SDK debounces: the add and the remove become one notification.
	switch k {
	case listTools:
		c.Method = "notifications/tools/list_changed"
		e.srv.AddTool(&mcp.Tool{Name: placeholder, InputSchema: placeholderSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errPlaceholder
		})
		e.srv.RemoveTools(placeholder)
	case listPrompts:
		c.Method = "notifications/prompts/list_changed"
		e.srv.AddPrompt(&mcp.Prompt{Name: placeholder}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, errPlaceholder
		})
		e.srv.RemovePrompts(placeholder)
	case listResources:
		c.Method = "notifications/resources/list_changed"
		e.srv.AddResource(&mcp.Resource{URI: placeholderURI, Name: placeholder}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, errPlaceholder
		})
		e.srv.RemoveResources(placeholderURI)
	}
	e.g.record(c, e.g.cfg.PreviewBytes)
}
