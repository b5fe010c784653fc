package sqliteexport

import (
	"strings"
	"time"

	"github.com/capsem/capsem/store"
)

// Linking a model's MCP tool call to the MCP call that carried it
// (tool_calls.mcp_call_id → mcp_calls.id).
//
// The events of a session are read in store order, which is time order. A
// model call is recorded when the MITM has copied its whole response, and
// an MCP call when its response comes back. Usually the agent runs a tool
// after that copy, so the mcp_calls row of a tool call's execution comes
// after the tool call's row in the stream: each tool call with origin mcp
// waits in a pending list, and an MCP tools/call takes the oldest waiting
// tool call of its tool, preferring one whose server part names its server
// (gateway servers are named as claude's mcp__SERVER__TOOL names them),
// otherwise one of any server. But the guest acts on the stream's last
// event, which may reach it before the MITM's copy ends, and a fast MCP
// server (the gateway answers in about 2 ms) can then be recorded before
// the model call: an MCP tools/call that took no tool call waits in a short
// list of recent ones, and a tool call takes one of its tool made after its
// model call started and at most mcpLinkSkew before it was recorded.
//
// A link is an UPDATE of the tool call's row, sent after the INSERTs of
// both rows in the same ordered stream of statements (the later of the two
// events makes it). One pass, no second reading of the file.

const (
	// mcpLinkWindow is how long after its model call is recorded a tool
	// call may still be executed. The MCP TypeScript SDK gives up on a
	// request after 60 s by default (DEFAULT_REQUEST_TIMEOUT_MSEC), and
	// claude may wait for the user to allow the tool first; ten minutes
	// covers both with room, while a later call of the same tool, past
	// it, belongs to a later tool call rather than one the agent never ran.
	mcpLinkWindow = 10 * time.Minute
	// mcpLinkSkew is how long before its model call is recorded an MCP
	// call may have run the model call's tool call: the time between
	// the stream's last event, which the agent acts on, and the end of
	// the body the MITM copies. That is milliseconds when the upstream
	// ends the body with its last event (a gateway call recorded first
	// was 2 ms ahead); 30 s leaves room for an upstream slow to end the
	// body, while an MCP call of the same tool from further back in a
	// long streamed response (another agent's, sharing the session) is
	// not taken.
	mcpLinkSkew = 30 * time.Second
	// mcpLinkPending bounds the tool calls waiting for their MCP call:
	// past it the oldest quarter is dropped (stays unlinked), at once so
	// that a full list costs one copy per mcpLinkPending/4 tool calls. A
	// session asks for a few MCP tools a minute; 4096 waiting at once is
	// an agent that never runs them. With mcpLinkNameMax, an entry holds
	// at most 1 KiB of strings (name and call id) plus its 104-byte
	// struct, so the list holds at most about 4.4 MiB.
	mcpLinkPending = 4096
	// mcpLinkRecent bounds the MCP calls that took no tool call and wait
	// for one recorded after them (at most 64 × 1 KiB of names): past
	// it the oldest is dropped. They are the calls of the last
	// mcpLinkSkew, a handful for an agent running tools in parallel.
	mcpLinkRecent = 64
	// mcpLinkNameMax caps the tool name, call id and server name the
	// linker keeps; a longer one is not linked. The name is the model's
	// and the MITM previews up to 1 MiB of it; an MCP tool's name is at
	// most 128 characters (the MCP schema's tool name), and claude's
	// mcp__SERVER__TOOL adds a server name to it: 512 bytes is ample.
	mcpLinkNameMax = 512
)

// mcpToolCall is a tool_calls row with origin mcp waiting for the
// mcp_calls row of its execution.
type mcpToolCall struct {
	row    int64     // its tool_calls.id
	start  time.Time // its model call's start: its event time less its duration
	at     time.Time // its model call's event time
	server string    // SERVER of mcp__SERVER__TOOL; "" when the name has no server part
	tool   string    // the tool's name as the MCP server knows it
	callID string    // the provider's call id, which a later tool result echoes
}

// mcpRecentCall is an mcp_calls row of a tools/call that took no waiting
// tool call, waiting for one recorded after it.
type mcpRecentCall struct {
	row    int64     // its mcp_calls.id
	at     time.Time // its event time
	server string    // its server_name
	tool   string    // its tool_name
}

// mcpLinker holds the tool calls of one session waiting for their MCP
// call, and its recent MCP calls waiting for their tool call. The zero
// value (with link set) is ready; reset it between sessions.
type mcpLinker struct {
	pending []mcpToolCall
	recent  []mcpRecentCall
	done    map[string]struct{} // answered's set of call ids, reused
	// link records that the tool_calls row toolCall was carried by the
	// mcp_calls row mcpCall.
	link func(toolCall, mcpCall int64) error
}

func (l *mcpLinker) reset() {
	clear(l.pending)
	l.pending = l.pending[:0]
	clear(l.recent)
	l.recent = l.recent[:0]
}

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

// toolCall takes a model call's tool call, the tool_calls row row, of a
// model call recorded at at after took. An MCP tool's call is linked at
// once to a recent MCP call of its tool made from the model call's start
// to mcpLinkSkew before at (of those the oldest whose server is the
// name's server part, else the oldest), or else waits in the pending list.
func (l *mcpLinker) toolCall(row int64, at time.Time, took time.Duration, tc *store.ToolCall) error {
	if tc.Origin != "mcp" || tc.Name == "" || len(tc.Name) > mcpLinkNameMax || len(tc.CallID) > mcpLinkNameMax {
		return nil
	}
	start := at
	if took > 0 {
		start = at.Add(-took)
	}
	server, tool := splitMCPName(tc.Name)
	if len(l.recent) > 0 {
		best, anyServer := -1, -1
		keep := l.recent[:0]
		for _, r := range l.recent {
			if at.Sub(r.at) > mcpLinkSkew {
				continue // expired: every later model call is recorded later still
			}
			keep = append(keep, r)
			if best >= 0 || r.tool != tool || r.at.Before(start) {
				continue
			}
			if anyServer < 0 {
				anyServer = len(keep) - 1
			}
			if server != "" && r.server == server {
				best = len(keep) - 1
			}
		}
		clear(l.recent[len(keep):])
		l.recent = keep
		if best < 0 {
			best = anyServer
		}
		if best >= 0 {
			mcp := l.recent[best].row
			n := best + copy(l.recent[best:], l.recent[best+1:])
			l.recent[n] = mcpRecentCall{}
			l.recent = l.recent[:n]
			return l.link(row, mcp)
		}
	}
	if len(l.pending) == mcpLinkPending {
		n := copy(l.pending, l.pending[mcpLinkPending/4:])
		clear(l.pending[n:])
		l.pending = l.pending[:n]
	}
	l.pending = append(l.pending, mcpToolCall{row: row, start: start, at: at, server: server, tool: tool, callID: tc.CallID})
	return nil
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
	if l.done == nil {
		l.done = make(map[string]struct{}, len(results))
	}
	for i := range results {
		if results[i].CallID != "" {
			l.done[results[i].CallID] = struct{}{}
		}
	}
	keep := l.pending[:0]
	for _, p := range l.pending {
		if _, done := l.done[p.callID]; !done || p.callID == "" {
			keep = append(keep, p)
		}
	}
	clear(l.done)
	clear(l.pending[len(keep):])
	l.pending = keep
}

// mcpCall takes the MCP call c, the mcp_calls row row recorded at at, and
// links it to the pending tool call it executed: one of its tool whose
// model call started at or before at and was recorded at most
// mcpLinkWindow before it; of those the oldest whose server part is c's
// server, else the oldest. Tool calls past the window are dropped. A
// tools/call that finds none waits among the recent MCP calls.
func (l *mcpLinker) mcpCall(row int64, at time.Time, c *store.MCPCall) error {
	if c.Method != "tools/call" || c.ToolName == "" || len(c.ToolName) > mcpLinkNameMax || len(c.ServerName) > mcpLinkNameMax {
		return nil
	}
	best, anyServer := -1, -1
	for i, p := range l.pending {
		if p.tool != c.ToolName || at.Before(p.start) || at.Sub(p.at) > mcpLinkWindow {
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
	var toolRow int64
	keep := l.pending[:0]
	for i, p := range l.pending {
		switch {
		case i == best:
			toolRow = p.row
		case at.Sub(p.at) > mcpLinkWindow:
			// expired: events come in time order, so no later MCP call matches it
		default:
			keep = append(keep, p)
		}
	}
	clear(l.pending[len(keep):])
	l.pending = keep
	if toolRow != 0 {
		return l.link(toolRow, row)
	}
	if len(l.recent) == mcpLinkRecent {
		n := copy(l.recent, l.recent[1:])
		l.recent[n] = mcpRecentCall{}
		l.recent = l.recent[:n]
	}
	l.recent = append(l.recent, mcpRecentCall{row: row, at: at, server: c.ServerName, tool: c.ToolName})
	return nil
}
