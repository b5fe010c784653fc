package mcpscan

import (
	"strings"

	"github.com/capsem/capsem/store"
)

// Kind says what a JSON-RPC 2.0 message is.
type Kind uint8

const (
	Request      Kind = iota + 1 // a method and an id: a response is due
	Notification                 // a method and no id: no response
	Response                     // a result for an id
	Error                        // an error for an id (which may be null)
)

func (k Kind) String() string {
	switch k {
	case Request:
		return "request"
	case Notification:
		return "notification"
	case Response:
		return "response"
	case Error:
		return "error"
	}
	return "unknown"
}

// The caps on what a message keeps.
const (
	// DefaultPreviewBytes is the preview cap used when NewBody or NewStream
	// is given zero or less.
	DefaultPreviewBytes = 4 << 10
	// MaxIDBytes caps Message.ID: the record's cap of request_id.
	MaxIDBytes = store.MCPMaxIDBytes
	// MaxMethodBytes caps Message.Method; the longest MCP method,
	// "notifications/resources/list_changed", has 36 bytes.
	MaxMethodBytes = 128
	// MaxToolBytes caps Message.Tool and each of Message.ToolNames: the
	// record's cap of tool_name.
	MaxToolBytes = store.MCPMaxToolBytes
	// MaxToolNames caps Message.ToolNames. Servers list tens of tools; the
	// largest list seen was a few hundred (a GitHub server with every
	// toolset on).
	MaxToolNames = 1024
	// MaxEventBytes caps one server-sent event's data, as package provider
	// does: a tools/list result with long descriptions and schemas fits.
	MaxEventBytes = 8 << 20
)

// Message is one JSON-RPC 2.0 message as it ended in a body or an event.
type Message struct {
	Kind Kind
	// ID is the message's id as JSON text: 7, or "abc" with its quotes, or
	// null (an error response to a request that could not be read); "" for
	// a notification (and for a response without one, which is broken
	// JSON-RPC). At most MaxIDBytes: a longer string id is cut and
	// quoted again.
	ID string
	// Method is the method of a request or notification.
	Method string
	// Tool is what the call names: params.name for tools/call and
	// prompts/get, params.uri for resources/read, resources/subscribe and
	// resources/unsubscribe. At most MaxToolBytes.
	Tool string
	// Preview is the params of a request or notification, or the result or
	// error of a response, as compact JSON cut at the preview cap (so it may
	// be invalid JSON when cut).
	Preview string
	// PreviewTruncated is set when Preview was cut at the cap.
	PreviewTruncated bool
	// ErrorCode and ErrorMessage are an error response's error.code and
	// error.message (the message cut at the preview cap).
	ErrorCode    int
	ErrorMessage string
	// Bytes is the size of the message in the body or event data, from its
	// opening brace to its closing one.
	Bytes int64
	// ToolNames is, for a response whose result has a tools array (a
	// tools/list result), the name of each tool, in order: at most
	// MaxToolNames names of at most MaxToolBytes each. ToolsTruncated is set
	// when there were more.
	ToolNames      []string
	ToolsTruncated bool
	// Ambiguous is set when a member that decides what the message does —
	// jsonrpc, id, method, params, or the params' name or uri — appears
	// twice, or the name or uri was cut at MaxToolBytes. Parsers disagree
	// on duplicate members (encoding/json and JSON.parse keep the last,
	// others the first or refuse), so what this package reports may not be
	// what the server acts on: a caller deciding on the message must refuse
	// it.
	Ambiguous bool
}

// toolParam says which member of params names what a method calls.
func toolParam(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return "uri"
	}
	return ""
}

// KnownMethod reports whether method is one of MCP's (any notification
// counts). Recognition does not depend on it: any JSON-RPC 2.0 message is
// parsed; it tells MCP from other JSON-RPC, should a caller care.
func KnownMethod(method string) bool {
	switch method {
	case "initialize", "ping",
		"tools/list", "tools/call",
		"resources/list", "resources/read", "resources/templates/list",
		"resources/subscribe", "resources/unsubscribe",
		"prompts/list", "prompts/get",
		"completion/complete", "logging/setLevel",
		"sampling/createMessage", "roots/list", "elicitation/create":
		return true
	}
	return strings.HasPrefix(method, "notifications/")
}
