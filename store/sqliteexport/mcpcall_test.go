package sqliteexport

import (
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// TestMCPCalls: an MCP call event is one mcp_calls row with every column,
// and --scrub redacts a credential in its previews.
func TestMCPCalls(t *testing.T) {
	st := storeWith(t, []store.Event{{Time: t0.Add(time.Second), MCPCall: &store.MCPCall{
		ServerName: "mcp.example.com/mcp", Method: "tools/call", ToolName: "read_file", RequestID: `"7"`,
		RequestPreview:  `{"name":"read_file","arguments":{"token":"ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}`,
		ResponsePreview: `{"content":[{"type":"text","text":"ok"}]}`, Decision: store.Denied, Reason: "mcp-tool-denied",
		MatchedRule: "mcp.rules[2] (line 16) server=mcp.example.com action=deny", Duration: 1500 * time.Microsecond,
		ErrorMessage: "capsem: denied", BytesSent: 120, BytesReceived: 80,
	}}, {Time: t0.Add(2 * time.Second), MCPCall: &store.MCPCall{ServerName: "files", Method: "notifications/initialized", Decision: store.Allowed}}})
	for _, c := range []struct {
		scrub bool
		why   string
	}{{false, "as recorded"}, {true, "--scrub redacts the token in the preview"}} {
		out, res := export(t, st, Options{Scrub: c.scrub})
		if res.MCPCalls != 2 {
			t.Errorf("%s: result %+v, want 2 mcp calls", c.why, res)
		}
		db := openExport(t, out)
		for _, err := range VerifySchema(db, SchemaVersion) {
			t.Error(err)
		}
		rows := queryRows(t, db, `SELECT server_name, method, tool_name, request_id, request_preview, response_preview, decision,
			duration_ms, error_message, bytes_sent, bytes_received, reason, matched_rule FROM mcp_calls ORDER BY id`)
		if len(rows) != 2 {
			t.Fatalf("%s: mcp_calls %v", c.why, rows)
		}
		preview := `{"name":"read_file","arguments":{"token":"ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}`
		if c.scrub {
			preview = `{"name":"read_file","arguments":{"token":"[REDACTED:github-token]"}}`
		}
		want := map[string]any{"server_name": "mcp.example.com/mcp", "method": "tools/call", "tool_name": "read_file", "request_id": `"7"`,
			"request_preview": preview, "response_preview": `{"content":[{"type":"text","text":"ok"}]}`, "decision": "denied",
			"duration_ms": 1.5, "error_message": "capsem: denied", "bytes_sent": int64(120), "bytes_received": int64(80),
			"reason": "mcp-tool-denied", "matched_rule": "mcp.rules[2] (line 16) server=mcp.example.com action=deny"}
		for k, v := range want {
			if rows[0][k] != v {
				t.Errorf("%s: %s = %#v, want %#v", c.why, k, rows[0][k], v)
			}
		}
		if rows[1]["request_id"] != nil || rows[1]["tool_name"] != nil || rows[1]["method"] != "notifications/initialized" {
			t.Errorf("%s: a notification's row %v: no id, no tool", c.why, rows[1])
		}
		db.Close()
	}
}
