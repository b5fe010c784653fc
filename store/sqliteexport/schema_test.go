package sqliteexport

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// wantColumns are the columns the issue asks for (its names are kept),
// plus those this package adds (seq, *_ms, and the store's extra fields).
var wantColumns = map[string][]string{
	"sessions": {"id", "started_at", "started_at_ms", "ended_at", "ended_at_ms", "command", "exit_code",
		"policy_sha256", "image", "host", "events", "allowed", "denied", "dns", "net", "model_calls",
		"input_tokens", "output_tokens", "cost_usd", "lost"},
	"net_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "domain", "ip", "port", "src_ip", "src_port",
		"transport", "conn_type", "decision", "reason", "matched_rule", "method", "path", "query", "status_code",
		"bytes_sent", "bytes_received", "duration_ms", "request_headers", "response_headers",
		"request_body_preview", "response_body_preview", "count", "detail"},
	"dns_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "qname", "qtype", "transport", "decision",
		"reason", "matched_rule", "answer", "resolver_asked"},
	"model_calls": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "provider", "model", "method", "path", "stream",
		"system_prompt_preview", "messages_count", "tools_count", "request_bytes", "request_body_preview",
		"message_id", "status_code", "text_content", "thinking_content", "stop_reason", "input_tokens",
		"output_tokens", "cache_read_tokens", "cache_write_tokens", "duration_ms", "response_bytes",
		"estimated_cost_usd", "trace_id", "usage_details"},
	"tool_calls": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "model_call_id", "call_index", "call_id",
		"tool_name", "arguments", "origin", "mcp_call_id"},
	"tool_responses": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "model_call_id", "call_id",
		"content_preview", "is_error"},
	"mcp_calls": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "server_name", "method", "tool_name",
		"request_id", "request_preview", "response_preview", "decision", "duration_ms", "error_message",
		"bytes_sent", "bytes_received"},
	"fs_events":    {"id", "session_id", "seq", "timestamp", "timestamp_ms", "action", "path", "size"},
	"exec_events":  {"id", "session_id", "seq", "timestamp", "timestamp_ms", "command", "exit_code", "duration_ms"},
	"other_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "kind"},
}

// exportSmall exports a store of two sessions of 8 events each.
func exportSmall(t *testing.T) string {
	t.Helper()
	st := fillStore(t, 2, 8)
	defer st.Close()
	out := filepath.Join(t.TempDir(), "out.db")
	if _, err := Export(context.Background(), st, out, Options{}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSchemaTablesAndColumns(t *testing.T) {
	db := openExport(t, exportSmall(t))
	var want []string
	for tbl := range wantColumns {
		want = append(want, tbl)
	}
	slices.Sort(want)
	if got := tableNames(t, db); !slices.Equal(got, want) {
		t.Fatalf("tables = %v, want %v", got, want)
	}
	for tbl, cols := range wantColumns {
		var got []string
		for _, r := range pragmaRows(t, db, "table_info('"+tbl+"')") {
			got = append(got, r["name"].(string))
		}
		if !slices.Equal(got, cols) {
			t.Errorf("%s columns =\n %v\nwant\n %v", tbl, got, cols)
		}
	}
}

func TestSchemaPrimaryKeys(t *testing.T) {
	db := openExport(t, exportSmall(t))
	for tbl := range wantColumns {
		for _, r := range pragmaRows(t, db, "table_info('"+tbl+"')") {
			pk := r["pk"].(int64)
			if (r["name"] == "id") != (pk == 1) {
				t.Errorf("%s.%s: pk = %d; want id (and only id) as the primary key", tbl, r["name"], pk)
			}
			if r["name"] == "id" && tbl != "sessions" && r["type"] != "INTEGER" {
				t.Errorf("%s.id type %v, want INTEGER", tbl, r["type"])
			}
		}
	}
}

func TestSchemaForeignKeys(t *testing.T) {
	db := openExport(t, exportSmall(t))
	type fk struct{ from, table, to string }
	want := map[string][]fk{}
	for tbl := range wantColumns {
		if tbl != "sessions" {
			want[tbl] = append(want[tbl], fk{"session_id", "sessions", "id"})
		}
	}
	want["tool_calls"] = append(want["tool_calls"], fk{"model_call_id", "model_calls", "id"}, fk{"mcp_call_id", "mcp_calls", "id"})
	want["tool_responses"] = append(want["tool_responses"], fk{"model_call_id", "model_calls", "id"})
	for tbl := range wantColumns {
		var got []fk
		for _, r := range pragmaRows(t, db, "foreign_key_list('"+tbl+"')") {
			got = append(got, fk{r["from"].(string), r["table"].(string), r["to"].(string)})
		}
		cmp := func(a, b fk) int {
			if a.from < b.from {
				return -1
			}
			if a.from > b.from {
				return 1
			}
			return 0
		}
		slices.SortFunc(got, cmp)
		w := slices.Clone(want[tbl])
		slices.SortFunc(w, cmp)
		if !slices.Equal(got, w) {
			t.Errorf("%s foreign keys = %v, want %v", tbl, got, w)
		}
	}
}

func TestSchemaIndexes(t *testing.T) {
	db := openExport(t, exportSmall(t))
	// index columns per table, as "col1,col2"; unique marked with "!".
	indexed := func(tbl string) map[string]bool {
		out := map[string]bool{}
		for _, ix := range pragmaRows(t, db, "index_list('"+tbl+"')") {
			var cols []string
			for _, c := range pragmaRows(t, db, "index_info('"+ix["name"].(string)+"')") {
				cols = append(cols, c["name"].(string))
			}
			key := ""
			for i, c := range cols {
				if i > 0 {
					key += ","
				}
				key += c
			}
			if ix["unique"].(int64) == 1 {
				key = "!" + key
			}
			out[key] = true
		}
		return out
	}
	want := map[string][]string{
		"sessions":       {"!id", "started_at"},
		"net_events":     {"domain", "path"},
		"dns_events":     {"qname"},
		"model_calls":    {"trace_id"},
		"tool_calls":     {"model_call_id", "call_id", "mcp_call_id"},
		"tool_responses": {"model_call_id", "call_id"},
		"fs_events":      {"path"},
	}
	for _, tbl := range eventTables {
		want[tbl] = append(want[tbl], "session_id,timestamp", "!session_id,seq")
	}
	for tbl, ixs := range want {
		got := indexed(tbl)
		for _, ix := range ixs {
			if !got[ix] {
				t.Errorf("%s: no index on (%s); have %v", tbl, ix, got)
			}
		}
	}
	// The indexes are used: a lookup by session and time is not a scan.
	plan := queryRows(t, db, "EXPLAIN QUERY PLAN SELECT * FROM net_events WHERE session_id = 'x' AND timestamp > '2026'")
	if detail, _ := plan[0]["detail"].(string); !containsFold(detail, "using index") {
		t.Errorf("query plan %q does not use an index", detail)
	}
}

func TestSchemaVersionAndApplicationID(t *testing.T) {
	db := openExport(t, exportSmall(t))
	var v, app int64
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion {
		t.Errorf("user_version = %d, want %d", v, SchemaVersion)
	}
	if err := db.QueryRow("PRAGMA application_id").Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != ApplicationID {
		t.Errorf("application_id = %#x, want %#x", app, ApplicationID)
	}
}

func TestIntegrityAndForeignKeyCheck(t *testing.T) {
	db := openExport(t, exportSmall(t))
	var ok string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if ok != "ok" {
		t.Errorf("integrity_check: %s", ok)
	}
	if bad := pragmaRows(t, db, "foreign_key_check"); len(bad) != 0 {
		t.Errorf("foreign_key_check: %v", bad)
	}
}
