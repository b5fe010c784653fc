package sqliteexport

import (
	"strings"
	"time"

	"github.com/capsem/capsem/store"
)

// Linking a model's MCP tool call to the MCP call that carried it
// (tool_calls.mcp_call_id → mcp_calls.id).
//
// The events of a session are read in store order, which is time order: a
// model call is recorded when its response ends, before the agent runs the
// tools it asked for, and an MCP call when its response comes back. So the
// mcp_calls row of a tool call's execution comes after the tool call's row
// in the stream, and the link is made when it arrives: each tool call with
// origin mcp waits in a pending list, and an MCP tools/call takes the
// oldest waiting tool call of its tool, preferring one whose server part
// names its server (gateway servers are named as claude's mcp__SERVER__TOOL
// names them), otherwise one of any server. The link is an UPDATE of the
// tool call's row, sent after its INSERT in the same ordered stream of
// statements. One pass, no second reading of the file.

const (
	// mcpLinkWindow is how long after its model call a tool call may
	// still be executed. The MCP TypeScript SDK gives up on a request
	// after 60 s by default (DEFAULT_REQUEST_TIMEOUT_MSEC), and claude
	// may wait for the user to allow the tool first; ten minutes covers
	// both with room, while a later call of the same tool, past it,
	// belongs to a later tool call rather than one the agent never ran.
	mcpLinkWindow = 10 * time.Minute
	// mcpLinkPending bounds the tool calls waiting for their MCP call:
	// past it the oldest is dropped (stays unlinked). A session asks for
	// a few MCP tools a minute; 4096 waiting at once is an agent that
	// never runs them, and memory stays about 400 KiB.
	mcpLinkPending = 4096
)

// mcpToolCall is a tool_calls row with origin mcp waiting for the
// mcp_calls row of its execution.
type mcpToolCall struct {
	row    int64     // its tool_calls.id
	at     time.Time // its model call's event time
	server string    // SERVER of mcp__SERVER__TOOL; "" when the name has no server part
	tool   string    // the tool's name as the MCP server knows it
	callID string    // the provider's call id, which a later tool result echoes
}

// mcpLinker holds the tool calls of one session waiting for their MCP
// call. The zero value is ready; reset it between sessions.
type mcpLinker struct {
	pending []mcpToolCall
	// link records that the tool_calls row toolCall was carried by the
	// mcp_calls row mcpCall.
	link func(toolCall, mcpCall int64) error
}

func (l *mcpLinker) reset() { clear(l.pending); l.pending = l.pending[:0] }

// splitMCPName returns the server and tool parts of a tool name as claude
// builds it for MCP tools, mcp__SERVER__TOOL, split at the first "__"
// after the prefix (either part may hold single underscores; a "__" in the
// server name cannot be told from the separator, so it is taken as one).
// Another name (an OpenAI mcp_call item's, or one without the separator)
// is the tool's whole name, of no server.
func splitMCPName(name string) (server, tool string) {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if s, t, ok := strings.Cut(rest, "__"); ok && s != "" && t != "" {
			return s, t
		}
	}
	return "", name
}

// toolCall adds a model call's tool call, the tool_calls row row, made at
// the model call's event time at, to the pending list if it is an MCP tool.
func (l *mcpLinker) toolCall(row int64, at time.Time, tc *store.ToolCall) {
	if tc.Origin != "mcp" || tc.Name == "" {
		return
	}
	if len(l.pending) == mcpLinkPending {
		l.pending = append(l.pending[:0], l.pending[1:]...)
	}
	server, tool := splitMCPName(tc.Name)
	l.pending = append(l.pending, mcpToolCall{row: row, at: at, server: server, tool: tool, callID: tc.CallID})
}

// answered drops the pending tool calls whose results a model call's
// request carries: the agent sent the result back, so any MCP call of
// theirs came before this model call, and a later one is not theirs (a
// tool call the user refused has a result and no MCP call, and must not
// take the MCP call of the next call of its tool).
func (l *mcpLinker) answered(results []store.ToolResult) {
	if len(results) == 0 || len(l.pending) == 0 {
		return
	}
	keep := l.pending[:0]
	for _, p := range l.pending {
		done := false
		for i := range results {
			if p.callID != "" && results[i].CallID == p.callID {
				done = true
				break
			}
		}
		if !done {
			keep = append(keep, p)
		}
	}
	clear(l.pending[len(keep):])
	l.pending = keep
}

// mcpCall takes the pending tool call that the MCP call c, recorded at at,
// executed, and returns its tool_calls row; 0 when none. A tools/call of
// the tool made at or after the tool call's model call and within
// mcpLinkWindow of it matches; of those the oldest whose server part is
// c's server, else the oldest. Tool calls past the window are dropped.
func (l *mcpLinker) mcpCall(at time.Time, c *store.MCPCall) int64 {
	if c.Method != "tools/call" || c.ToolName == "" || len(l.pending) == 0 {
		return 0
	}
	best, anyServer := -1, -1
	for i, p := range l.pending {
		if p.tool != c.ToolName || at.Before(p.at) || at.Sub(p.at) > mcpLinkWindow {
			continue
		}
		if anyServer < 0 {
			anyServer = i
		}
		if p.server != "" && p.server == c.ServerName {
			best = i
			break
		}
	}
	if best < 0 {
		best = anyServer
	}
	var row int64
	keep := l.pending[:0]
	for i, p := range l.pending {
		switch {
		case i == best:
			row = p.row
		case !at.Before(p.at) && at.Sub(p.at) > mcpLinkWindow:
			// expired: events come in time order, so no later MCP call matches it
		default:
			keep = append(keep, p)
		}
	}
	clear(l.pending[len(keep):])
	l.pending = keep
	return row
}
