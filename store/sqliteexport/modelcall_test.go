package sqliteexport

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// modelCallStore holds two sessions. s1: a DNS answer, a streamed model
// call whose response made two tool calls, a flow, a non-streamed call
// whose request sent both results back (one an error), and a model call
// event with no field set. s2, started later: one call with a tool call
// and, in the same request, the result of a call s2 never saw.
func modelCallStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Begin(store.Session{ID: "s1", StartedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Time: t0.Add(time.Millisecond), DNS: &store.DNS{QName: "api.anthropic.com", QType: "A", Decision: store.Allowed}})
	w.Append(store.Event{Time: t0.Add(2 * time.Millisecond), ModelCall: &store.ModelCall{
		Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-sonnet-4", Method: "POST", Path: "/v1/messages",
		Stream: true, SystemPromptPreview: "You are Claude Code.", MessagesCount: 3, ToolsCount: 17,
		RequestBytes: 45678, RequestBodyPreview: `{"model":"claude-sonnet-4","stream":true}`, MessageID: "msg_01A",
		StatusCode: 200, TextContent: "I'll list the files.", ThinkingContent: "ls first \xff", StopReason: "tool_use",
		InputTokens: 1200, OutputTokens: 80, CacheReadTokens: 30000, CacheWriteTokens: 512,
		Duration: 2500 * time.Microsecond, ResponseBytes: 6789, CostUSD: 0.015625, TraceID: "trace-1",
		UsageDetails: `{"input_tokens":1200,"output_tokens":80}`,
		ToolCalls: []store.ToolCall{
			{Index: 0, CallID: "toolu_01", Name: "Bash", Arguments: `{"command":"ls"}`, Origin: "native"},
			{Index: 1, CallID: "toolu_02", Name: "read_file", Arguments: `{"path":"go.mod"}`, Origin: "mcp"},
		},
	}})
	w.Append(store.Event{Time: t0.Add(3 * time.Millisecond), Net: &store.Net{Domain: "api.anthropic.com", Decision: store.Allowed}})
	w.Append(store.Event{Time: t0.Add(4 * time.Millisecond), ModelCall: &store.ModelCall{
		Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-sonnet-4", Method: "POST", Path: "/v1/messages",
		MessagesCount: 5, ToolsCount: 17, RequestBytes: 47000, StatusCode: 200, TextContent: "Done.", StopReason: "end_turn",
		InputTokens: 1400, OutputTokens: 20, Duration: time.Second, ResponseBytes: 900, CostUSD: 0.0078125, TraceID: "trace-1",
		ToolResults: []store.ToolResult{
			{CallID: "toolu_01", ContentPreview: "go.mod\nmain.go"},
			{CallID: "toolu_02", ContentPreview: "no such file", IsError: true},
		},
	}})
	w.Append(store.Event{Time: t0.Add(5 * time.Millisecond), Kind: store.KindModelCall})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}

	w, err = st.Begin(store.Session{ID: "s2", StartedAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Time: t0.Add(time.Hour), ModelCall: &store.ModelCall{
		Provider: "openai", Domain: "api.openai.com", Model: "gpt-5", Stream: true, InputTokens: 10, OutputTokens: 7, CostUSD: 1,
		ToolCalls:   []store.ToolCall{{Index: 0, CallID: "call_9", Name: "shell", Arguments: "{}"}},
		ToolResults: []store.ToolResult{{CallID: "call_from_before"}},
	}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestModelCalls(t *testing.T) {
	st := modelCallStore(t)
	out, res := export(t, st, Options{})
	if want := (Result{Sessions: 2, Events: 6, NetEvents: 1, DNSEvents: 1, ModelCalls: 4, ToolCalls: 3, ToolResponses: 3,
		Duration: res.Duration}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	db := openExport(t, out)
	for _, err := range VerifySchema(db, SchemaVersion) {
		t.Error(err)
	}
	if bad := pragmaRows(t, db, "foreign_key_check"); len(bad) != 0 {
		t.Errorf("foreign_key_check: %v", bad)
	}

	mc := queryRows(t, db, "SELECT * FROM model_calls ORDER BY id")
	if len(mc) != 4 {
		t.Fatalf("%d model calls", len(mc))
	}
	checkRow(t, "model_calls[1]", mc[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(2), "timestamp": ts(2 * time.Millisecond), "timestamp_ms": tsMS(2 * time.Millisecond),
		"provider": "anthropic", "domain": "api.anthropic.com", "model": "claude-sonnet-4", "method": "POST", "path": "/v1/messages",
		"stream": int64(1), "system_prompt_preview": "You are Claude Code.", "messages_count": int64(3), "tools_count": int64(17),
		"request_bytes": int64(45678), "request_body_preview": `{"model":"claude-sonnet-4","stream":true}`, "message_id": "msg_01A",
		"status_code": int64(200), "text_content": "I'll list the files.", "thinking_content": "ls first \uFFFD", "stop_reason": "tool_use",
		"input_tokens": int64(1200), "output_tokens": int64(80), "cache_read_tokens": int64(30000), "cache_write_tokens": int64(512),
		"duration_ms": 2.5, "response_bytes": int64(6789), "estimated_cost_usd": 0.015625, "trace_id": "trace-1",
		"usage_details": `{"input_tokens":1200,"output_tokens":80}`,
	})
	checkRow(t, "model_calls[2]", mc[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(4), "timestamp": ts(4 * time.Millisecond), "timestamp_ms": tsMS(4 * time.Millisecond),
		"provider": "anthropic", "domain": "api.anthropic.com", "model": "claude-sonnet-4", "method": "POST", "path": "/v1/messages",
		"stream": int64(0), "system_prompt_preview": nil, "messages_count": int64(5), "tools_count": int64(17),
		"request_bytes": int64(47000), "request_body_preview": nil, "message_id": nil,
		"status_code": int64(200), "text_content": "Done.", "thinking_content": nil, "stop_reason": "end_turn",
		"input_tokens": int64(1400), "output_tokens": int64(20), "cache_read_tokens": int64(0), "cache_write_tokens": int64(0),
		"duration_ms": 1000.0, "response_bytes": int64(900), "estimated_cost_usd": 0.0078125, "trace_id": "trace-1",
		"usage_details": nil,
	})
	// A model_call event with nothing set is still a row.
	checkRow(t, "model_calls[3]", mc[2], map[string]any{
		"id": int64(3), "session_id": "s1", "seq": int64(5), "timestamp": ts(5 * time.Millisecond), "timestamp_ms": tsMS(5 * time.Millisecond),
		"provider": nil, "domain": nil, "model": nil, "method": nil, "path": nil,
		"stream": int64(0), "system_prompt_preview": nil, "messages_count": int64(0), "tools_count": int64(0),
		"request_bytes": int64(0), "request_body_preview": nil, "message_id": nil,
		"status_code": nil, "text_content": nil, "thinking_content": nil, "stop_reason": nil,
		"input_tokens": int64(0), "output_tokens": int64(0), "cache_read_tokens": int64(0), "cache_write_tokens": int64(0),
		"duration_ms": 0.0, "response_bytes": int64(0), "estimated_cost_usd": 0.0, "trace_id": nil,
		"usage_details": nil,
	})
	if mc[3]["session_id"] != "s2" || mc[3]["id"] != int64(4) || mc[3]["seq"] != int64(1) || mc[3]["stream"] != int64(1) {
		t.Errorf("model_calls[4] = %v", mc[3])
	}

	tc := queryRows(t, db, "SELECT * FROM tool_calls ORDER BY id")
	if len(tc) != 3 {
		t.Fatalf("%d tool calls", len(tc))
	}
	checkRow(t, "tool_calls[1]", tc[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(2), "timestamp": ts(2 * time.Millisecond), "timestamp_ms": tsMS(2 * time.Millisecond),
		"model_call_id": int64(1), "call_index": int64(0), "call_id": "toolu_01", "tool_name": "Bash",
		"arguments": `{"command":"ls"}`, "origin": "native", "mcp_call_id": nil,
	})
	checkRow(t, "tool_calls[2]", tc[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(2), "timestamp": ts(2 * time.Millisecond), "timestamp_ms": tsMS(2 * time.Millisecond),
		"model_call_id": int64(1), "call_index": int64(1), "call_id": "toolu_02", "tool_name": "read_file",
		"arguments": `{"path":"go.mod"}`, "origin": "mcp", "mcp_call_id": nil,
	})
	checkRow(t, "tool_calls[3]", tc[2], map[string]any{
		"id": int64(3), "session_id": "s2", "seq": int64(1), "timestamp": ts(time.Hour), "timestamp_ms": tsMS(time.Hour),
		"model_call_id": int64(4), "call_index": int64(0), "call_id": "call_9", "tool_name": "shell",
		"arguments": "{}", "origin": nil, "mcp_call_id": nil,
	})

	tr := queryRows(t, db, "SELECT * FROM tool_responses ORDER BY id")
	if len(tr) != 3 {
		t.Fatalf("%d tool responses", len(tr))
	}
	checkRow(t, "tool_responses[1]", tr[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(4), "timestamp": ts(4 * time.Millisecond), "timestamp_ms": tsMS(4 * time.Millisecond),
		"model_call_id": int64(2), "call_id": "toolu_01", "content_preview": "go.mod\nmain.go", "is_error": int64(0),
	})
	checkRow(t, "tool_responses[2]", tr[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(4), "timestamp": ts(4 * time.Millisecond), "timestamp_ms": tsMS(4 * time.Millisecond),
		"model_call_id": int64(2), "call_id": "toolu_02", "content_preview": "no such file", "is_error": int64(1),
	})
	checkRow(t, "tool_responses[3]", tr[2], map[string]any{
		"id": int64(3), "session_id": "s2", "seq": int64(1), "timestamp": ts(time.Hour), "timestamp_ms": tsMS(time.Hour),
		"model_call_id": int64(4), "call_id": "call_from_before", "content_preview": nil, "is_error": int64(0),
	})

	// Each result of s1 joins the call it answers: asked for by the first
	// model call, answered in the request of the second.
	join := queryRows(t, db, `SELECT c.call_id, c.model_call_id AS asked_in, r.model_call_id AS answered_in, r.is_error
		FROM tool_calls c JOIN tool_responses r ON r.session_id = c.session_id AND r.call_id = c.call_id ORDER BY c.id`)
	want := []map[string]any{
		{"call_id": "toolu_01", "asked_in": int64(1), "answered_in": int64(2), "is_error": int64(0)},
		{"call_id": "toolu_02", "asked_in": int64(1), "answered_in": int64(2), "is_error": int64(1)},
	}
	if !reflect.DeepEqual(join, want) {
		t.Errorf("tool_calls ⋈ tool_responses = %v, want %v", join, want)
	}

	sums := queryRows(t, db, "SELECT id, events, dns, net, model_calls, input_tokens, output_tokens, cost_usd FROM sessions ORDER BY started_at")
	checkRow(t, "sessions[s1]", sums[0], map[string]any{"id": "s1", "events": int64(5), "dns": int64(1), "net": int64(1),
		"model_calls": int64(3), "input_tokens": int64(2600), "output_tokens": int64(100), "cost_usd": 0.0234375}) // costs exact in binary: the sum is exact
	checkRow(t, "sessions[s2]", sums[1], map[string]any{"id": "s2", "events": int64(1), "dns": int64(0), "net": int64(0),
		"model_calls": int64(1), "input_tokens": int64(10), "output_tokens": int64(7), "cost_usd": 1.0})

	// The ids are deterministic, scrubbed or not.
	for _, opt := range []Options{{}, {Scrub: true}} {
		a, _ := export(t, st, opt)
		b, _ := export(t, st, opt)
		if da, db := dump(t, openExport(t, a)), dump(t, openExport(t, b)); !reflect.DeepEqual(da, db) {
			t.Errorf("two exports (%+v) of the same store differ", opt)
		}
	}
}

// TestModelCallsInOneSessionExport exports s2 alone: its rows get ids from
// 1, and nothing of s1 comes along.
func TestModelCallsInOneSessionExport(t *testing.T) {
	st := modelCallStore(t)
	out := filepath.Join(t.TempDir(), "s2.db")
	res, err := Export(context.Background(), st, out, Options{Sessions: []string{"s2"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelCalls != 1 || res.ToolCalls != 1 || res.ToolResponses != 1 {
		t.Errorf("result %+v", res)
	}
	db := openExport(t, out)
	r := queryRows(t, db, `SELECT m.id AS m, c.id AS c, c.model_call_id AS cm, r.id AS r, r.model_call_id AS rm
		FROM model_calls m JOIN tool_calls c JOIN tool_responses r`)
	if len(r) != 1 || !reflect.DeepEqual(r[0], map[string]any{"m": int64(1), "c": int64(1), "cm": int64(1), "r": int64(1), "rm": int64(1)}) {
		t.Errorf("rows %v", r)
	}
}

// TestToolRowsShareTheirEventSeq: (session_id, seq) is unique where one
// event makes one row, and not in tool_calls and tool_responses.
func TestToolRowsShareTheirEventSeq(t *testing.T) {
	out, _ := export(t, modelCallStore(t), Options{})
	db := openExport(t, out)
	for tbl, want := range map[string]int64{"model_calls": 0, "tool_calls": 1, "tool_responses": 1} {
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM ` + tbl + ` GROUP BY session_id, seq HAVING count(*) > 1)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d (session_id, seq) pairs with several rows, want %d", tbl, n, want)
		}
	}
	rw := openRW(t, out)
	if _, err := rw.Exec(`INSERT INTO model_calls (session_id, seq, timestamp, timestamp_ms) VALUES ('s1', 2, 'x', 0)`); err == nil {
		t.Error("model_calls accepted a second row for one event")
	}
}
