package sqliteexport

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// modelCallAt is a model call recorded at t0+sec, at once, whose response
// asks for calls and whose request carried the results of the call ids in
// results.
func modelCallAt(sec float64, calls []store.ToolCall, results ...string) store.Event {
	return modelCallTook(sec, 0, calls, results...)
}

// modelCallTook is modelCallAt of a model call that took took seconds, so
// started at t0+sec-took.
func modelCallTook(sec, took float64, calls []store.ToolCall, results ...string) store.Event {
	mc := &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", ToolCalls: calls,
		Duration: time.Duration(took * float64(time.Second))}
	for _, id := range results {
		mc.ToolResults = append(mc.ToolResults, store.ToolResult{CallID: id, ContentPreview: "ok"})
	}
	return store.Event{Time: t0.Add(time.Duration(sec * float64(time.Second))), ModelCall: mc}
}

// echoCalls is n calls of mcp__gw__echo, call ids c0, c1, …
func echoCalls(n int) []store.ToolCall {
	calls := make([]store.ToolCall, n)
	for i := range calls {
		calls[i] = mcpTool("c"+strconv.Itoa(i), "mcp__gw__echo")
	}
	return calls
}

// unlinked is want for the tool calls of echoCalls(n), none linked but
// call id linkedID linked to the MCP call of request id requestID.
func unlinked(n int, linkedID, requestID string) map[string]string {
	want := map[string]string{}
	for i := range n {
		want["c"+strconv.Itoa(i)] = ""
	}
	want[linkedID] = requestID
	return want
}

// ids is n call ids r0, r1, … and then more.
func ids(n int, more ...string) []string {
	out := make([]string, 0, n+len(more))
	for i := range n {
		out = append(out, "r"+strconv.Itoa(i))
	}
	return append(out, more...)
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
		{[]store.Event{toolsCallAt(0.5, "gw", "echo", "1"), modelCallTook(1, 2, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")})},
			map[string]string{"t1": "1"}, "an MCP call recorded before its model call but after it started is linked: the guest acts on the stream's last event before the MITM's copy ends"},
		{[]store.Event{toolsCallAt(0.5, "gw", "echo", "1"), modelCallTook(1, 0.4, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")})},
			map[string]string{"t1": ""}, "an MCP call before its model call started is not its execution"},
		{[]store.Event{toolsCallAt(10, "gw", "echo", "1"), modelCallTook(100, 100, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")})},
			map[string]string{"t1": ""}, "an MCP call during a long stream but 90 s before it was recorded is past the 30 s skew"},
		{[]store.Event{toolsCallAt(0.5, "a", "echo", "1"), toolsCallAt(0.6, "gw", "echo", "2"),
			modelCallTook(1, 2, []store.ToolCall{mcpTool("t1", "mcp__gw__echo"), mcpTool("t2", "mcp__a__echo")})},
			map[string]string{"t1": "2", "t2": "1"}, "a recent MCP call goes to the tool call naming its server, not the older call of another"},
		{[]store.Event{toolsCallAt(0.5, "gw", "echo", "1"),
			modelCallTook(1, 2, []store.ToolCall{mcpTool("t1", "mcp__gw__echo"), mcpTool("t2", "mcp__gw__echo")}), toolsCallAt(2, "gw", "echo", "2")},
			map[string]string{"t1": "1", "t2": "2"}, "the first of two calls ran before its model call was recorded, the second after: both linked in order"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__"+strings.Repeat("s", 600)+"__echo")}), toolsCallAt(1, "gw", "echo", "1")},
			map[string]string{"t1": ""}, "a name past 512 bytes is not queued (it would fall back to gw's echo otherwise)"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool(strings.Repeat("x", 600), "mcp__gw__echo")}), toolsCallAt(1, "gw", "echo", "1")},
			map[string]string{strings.Repeat("x", 600): ""}, "a call id past 512 bytes is not queued"},
		{[]store.Event{modelCallAt(0, echoCalls(mcpLinkPending+1)), toolsCallAt(1, "gw", "echo", "1")},
			unlinked(mcpLinkPending+1, "c1024", "1"), "a full pending list drops its oldest quarter: c0…c1023 are never linked, c1024 is the oldest left"},
		{[]store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo"), mcpTool("t2", "mcp__gw__echo")}),
			modelCallAt(5, nil, ids(1000, "t1")...), toolsCallAt(6, "gw", "echo", "1")},
			map[string]string{"t1": "", "t2": "1"}, "a request with many results drops the answered tool call among them"},
	} {
		out, res := export(t, storeWith(t, c.events), Options{})
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
	st := storeWith(t, []store.Event{modelCallAt(0, []store.ToolCall{mcpTool("t1", "mcp__gw__echo")})}, []store.Event{toolsCallAt(1, "gw", "echo", "1")})
	out, res := export(t, st, Options{})
	if res.MCPLinks != 0 {
		t.Errorf("Result.MCPLinks = %d, want 0", res.MCPLinks)
	}
	if rows := queryRows(t, openExport(t, out), `SELECT id FROM tool_calls WHERE mcp_call_id IS NOT NULL`); len(rows) != 0 {
		t.Errorf("linked across sessions: %v", rows)
	}
}

// TestMCPLinkPendingBound: past mcpLinkPending waiting tool calls the
// oldest quarter is dropped, so memory stays bounded and they are never
// linked; past mcpLinkRecent unlinked MCP calls the oldest is dropped.
func TestMCPLinkPendingBound(t *testing.T) {
	var links [][2]int64
	l := mcpLinker{link: func(toolCall, mcpCall int64) error { links = append(links, [2]int64{toolCall, mcpCall}); return nil }}
	for i := range mcpLinkPending + 1 {
		if err := l.toolCall(int64(i+1), t0, 0, &store.ToolCall{Name: "mcp__gw__echo", Origin: "mcp"}); err != nil {
			t.Fatal(err)
		}
	}
	if want := mcpLinkPending*3/4 + 1; len(l.pending) != want {
		t.Fatalf("%d pending, want %d", len(l.pending), want)
	}
	if err := l.mcpCall(1, t0.Add(time.Second), &store.MCPCall{ServerName: "gw", Method: "tools/call", ToolName: "echo"}); err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0] != [2]int64{mcpLinkPending/4 + 1, 1} {
		t.Errorf("links %v, want [[%d 1]]: rows 1…%d were the oldest quarter and dropped", links, mcpLinkPending/4+1, mcpLinkPending/4)
	}

	l.reset()
	links = nil
	for i := range mcpLinkRecent + 1 {
		if err := l.mcpCall(int64(i+1), t0, &store.MCPCall{ServerName: "gw", Method: "tools/call", ToolName: "echo"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.recent) != mcpLinkRecent {
		t.Fatalf("%d recent, want %d", len(l.recent), mcpLinkRecent)
	}
	if err := l.toolCall(1, t0.Add(time.Second), 2*time.Second, &store.ToolCall{Name: "mcp__gw__echo", Origin: "mcp"}); err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0] != [2]int64{1, 2} {
		t.Errorf("links %v, want [[1 2]]: MCP call 1 was the oldest and dropped", links)
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

// FuzzMCPLinker: whatever the order, times and names of tool calls and MCP
// calls (the model and the guest choose them), a row is linked at most
// once, only to a row of its tool, and both lists stay within bounds.
func FuzzMCPLinker(f *testing.F) {
	f.Add([]byte{0, 1, 5, 1, 1, 6, 2, 0, 7, 3, 2, 2})
	f.Add([]byte{1, 1, 1, 0, 1, 2, 0, 0, 200, 1, 1, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		tools := []string{"echo", "read", "mcp__gw__echo", "mcp__a__read"}
		toolOf := map[int64]string{}
		mcpOf := map[int64]string{}
		toolLinked, mcpLinked := map[int64]bool{}, map[int64]bool{}
		l := mcpLinker{link: func(toolCall, mcpCall int64) error {
			if toolLinked[toolCall] || mcpLinked[mcpCall] {
				t.Fatalf("tool call %d or MCP call %d linked twice", toolCall, mcpCall)
			}
			toolLinked[toolCall], mcpLinked[mcpCall] = true, true
			if _, tool := splitMCPName(toolOf[toolCall]); tool != mcpOf[mcpCall] {
				t.Fatalf("tool call %d (%s) linked to MCP call %d (%s)", toolCall, toolOf[toolCall], mcpCall, mcpOf[mcpCall])
			}
			return nil
		}}
		at := t0
		var row int64
		for len(ops) >= 3 {
			op, dt, name := ops[0], ops[1], tools[int(ops[2])%len(tools)]
			ops = ops[3:]
			at = at.Add(time.Duration(dt) * time.Second)
			row++
			var err error
			switch op % 3 {
			case 0:
				toolOf[row] = name
				err = l.toolCall(row, at, time.Duration(op)*time.Second, &store.ToolCall{CallID: "c" + strconv.FormatInt(row, 10), Name: name, Origin: "mcp"})
			case 1:
				_, tool := splitMCPName(name)
				mcpOf[row] = tool
				err = l.mcpCall(row, at, &store.MCPCall{ServerName: "gw", Method: "tools/call", ToolName: tool})
			default:
				l.answered([]store.ToolResult{{CallID: "c" + strconv.FormatInt(row-int64(dt), 10)}})
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(l.pending) > mcpLinkPending || len(l.recent) > mcpLinkRecent {
				t.Fatalf("%d pending, %d recent", len(l.pending), len(l.recent))
			}
		}
	})
}
