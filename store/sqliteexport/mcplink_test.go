package sqliteexport

import (
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// modelCallAt is a model call at t0+sec whose response asks for calls and
// whose request carried the results of the call ids in results.
func modelCallAt(sec float64, calls []store.ToolCall, results ...string) store.Event {
	mc := &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", ToolCalls: calls}
	for _, id := range results {
		mc.ToolResults = append(mc.ToolResults, store.ToolResult{CallID: id, ContentPreview: "ok"})
	}
	return store.Event{Time: t0.Add(time.Duration(sec * float64(time.Second))), ModelCall: mc}
}

// mcpTool is a tool call the model made of an MCP tool.
func mcpTool(id, name string) store.ToolCall {
	return store.ToolCall{CallID: id, Name: name, Arguments: "{}", Origin: "mcp"}
}

// toolsCallAt is a tools/call of server's tool at t0+sec, told apart by its
// JSON-RPC id.
func toolsCallAt(sec float64, server, tool, requestID string) store.Event {
	return store.Event{Time: t0.Add(time.Duration(sec * float64(time.Second))), MCPCall: &store.MCPCall{
		ServerName: server, Method: "tools/call", ToolName: tool, RequestID: requestID, Decision: store.Allowed}}
}

// TestMCPLinks: a tool call with origin mcp gets the mcp_calls row of its
// execution in mcp_call_id; want maps each tool call's call_id to the
// request_id of the MCP call linked to it ("" for none).
func TestMCPLinks(t *testing.T) {
	for _, c := range []struct {
		events []store.Event
		want   map[string]string
		why    string
	}{
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}), toolsCallAt(1, "gw", "echo", "1")},
			map[string]string{"t1": "1"}, "mcp__gw__echo is carried by gw's echo call"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo"), mcpTool("t2", "mcp__gw__echo")}),
			toolsCallAt(1, "gw", "echo", "1"), toolsCallAt(2, "gw", "echo", "2")},
			map[string]string{"t1": "1", "t2": "2"}, "two identical calls are linked in order"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}), toolsCallAt(1, "mcp.example.com/mcp", "echo", "1")},
			map[string]string{"t1": "1"}, "a server name that is not SERVER falls back to any server (claude's name for a URL server is not its host/path)"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__a__echo"), mcpTool("t2", "mcp__gw__echo")}),
			toolsCallAt(1, "gw", "echo", "1"), toolsCallAt(2, "a", "echo", "2")},
			map[string]string{"t1": "2", "t2": "1"}, "gw's call goes to the tool call naming gw, not the older one naming a"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{{CallID: "t1", Name: "echo", Arguments: "{}", Origin: "native"}}), toolsCallAt(1, "gw", "echo", "1")},
			map[string]string{"t1": ""}, "a native tool is not linked, even to a call of a tool of its name"},
		{[]store.Event{toolsCallAt(0, "gw", "echo", "1"), modelCallAt(1, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")})},
			map[string]string{"t1": ""}, "an MCP call before the model call is not its execution"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__my_server__read_file")}),
			toolsCallAt(1, "my", "server__read_file", "0"), toolsCallAt(2, "my_server", "read_file", "1")},
			map[string]string{"t1": "1"}, "single underscores belong to the parts: split at the first __ after mcp__"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "echo")}), toolsCallAt(1, "mcp.example.com/mcp", "echo", "1")},
			map[string]string{"t1": "1"}, "a name without the prefix (an OpenAI mcp_call item) matches whole"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}), toolsCallAt(1, "gw", "other", "1")},
			map[string]string{"t1": ""}, "a call of another tool is not linked"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}), toolsCallAt(601, "gw", "echo", "1")},
			map[string]string{"t1": ""}, "past 10 minutes the call belongs to no waiting tool call"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}), toolsCallAt(599, "gw", "echo", "1")},
			map[string]string{"t1": "1"}, "within 10 minutes (a tool the user allowed after a while) it is linked"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}),
			modelCallAt(5, []store.ToolCall{mcpTool("t2", "mcp__gw__echo")}, "t1"), toolsCallAt(6, "gw", "echo", "1")},
			map[string]string{"t1": "", "t2": "1"}, "a tool call whose result went back first (the user refused it) does not take the next call's MCP call"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}), toolsCallAt(1, "gw", "echo", "1"), toolsCallAt(2, "gw", "echo", "2")},
			map[string]string{"t1": "1"}, "an MCP call is linked at most once: the second finds no tool call waiting"},
	} {
		st, err := store.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		w, err := st.Begin(store.Session{ID: "s1", StartedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range c.events {
			w.Append(ev)
		}
		w.End(nil)
		out, res := export(t, st, Options{})
		st.Close()
		db := openExport(t, out)
		got := map[string]string{}
		links := 0
		for _, r := range queryRows(t, db, `SELECT c.call_id, m.request_id FROM tool_calls c
			LEFT JOIN mcp_calls m ON m.id = c.mcp_call_id ORDER BY c.id`) {
			id, _ := r["request_id"].(string)
			got[r["call_id"].(string)] = id
			if id != "" {
				links++
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: links %v, want %v", c.why, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s linked to %q, want %q", c.why, k, got[k], v)
			}
		}
		if res.MCPLinks != links {
			t.Errorf("%s: Result.MCPLinks = %d, want %d", c.why, res.MCPLinks, links)
		}
		if bad := pragmaRows(t, db, "foreign_key_check"); len(bad) != 0 {
			t.Errorf("%s: foreign_key_check: %v", c.why, bad)
		}
	}
}

// TestMCPLinksPerSession: an MCP call of one session is never linked to a
// tool call of another, however close in time.
func TestMCPLinksPerSession(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, ev := range []store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")}), toolsCallAt(1, "gw", "echo", "1")} {
		w, err := st.Begin(store.Session{ID: "s" + string(rune('1'+i)), StartedAt: t0.Add(time.Duration(i) * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		w.Append(ev)
		w.End(nil)
	}
	out, res := export(t, st, Options{})
	if res.MCPLinks != 0 {
		t.Errorf("Result.MCPLinks = %d, want 0", res.MCPLinks)
	}
	if rows := queryRows(t, openExport(t, out), `SELECT id FROM tool_calls WHERE mcp_call_id IS NOT NULL`); len(rows) != 0 {
		t.Errorf("linked across sessions: %v", rows)
	}
}

// TestMCPLinkPendingBound: past mcpLinkPending waiting tool calls the
// oldest is dropped, so memory stays bounded and it is never linked.
func TestMCPLinkPendingBound(t *testing.T) {
	var l mcpLinker
	for i := range mcpLinkPending + 1 {
		l.toolCall(int64(i+1), t0, &store.ToolCall{Name: "mcp__gw__echo", Origin: "mcp"})
	}
	if len(l.pending) != mcpLinkPending {
		t.Fatalf("%d pending, want %d", len(l.pending), mcpLinkPending)
	}
	if row := l.mcpCall(t0.Add(time.Second), &store.MCPCall{ServerName: "gw", Method: "tools/call", ToolName: "echo"}); row != 2 {
		t.Errorf("linked row %d, want 2: row 1 was the oldest and dropped", row)
	}
}

func TestSplitMCPName(t *testing.T) {
	for _, c := range []struct {
		name, server, tool string
		why                string
	}{
		{"mcp__gw__echo", "gw", "echo", "claude's name of a gateway tool"},
		{"mcp__my_server__read_file", "my_server", "read_file", "single underscores stay in their part"},
		{"mcp__a__b__c", "a", "b__c", "split at the first __ after the prefix"},
		{"mcp__echo", "", "mcp__echo", "no separator: the whole name"},
		{"mcp____echo", "", "mcp____echo", "an empty server part is no server"},
		{"echo", "", "echo", "an OpenAI mcp_call item names the tool alone"},
	} {
		if s, tl := splitMCPName(c.name); s != c.server || tl != c.tool {
			t.Errorf("%s: splitMCPName(%q) = %q, %q, want %q, %q", c.why, c.name, s, tl, c.server, c.tool)
		}
	}
}

// FuzzSplitMCPName: the parts of any name (the model chose it) put back
// together give the name, and a server part never holds the separator.
func FuzzSplitMCPName(f *testing.F) {
	for _, s := range []string{"mcp__gw__echo", "mcp__a__b__c", "mcp__", "mcp____", "echo", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		server, tool := splitMCPName(name)
		if server == "" {
			if tool != name {
				t.Fatalf("no server, tool %q, want the whole name %q", tool, name)
			}
			return
		}
		if "mcp__"+server+"__"+tool != name || strings.Contains(server, "__") || tool == "" {
			t.Fatalf("splitMCPName(%q) = %q, %q", name, server, tool)
		}
	})
}
