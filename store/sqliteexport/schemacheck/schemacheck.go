// Package schemacheck verifies that a SQLite file has the schema of a
// capsem export, as the export issue specifies it: every table, every
// column in order, the primary keys, the foreign keys, the indexes and the
// schema version. It is the one statement of that specification: the
// exporter's tests, the end-to-end tests and `capsem inspect` all check
// against it. It reads the database and never writes to it.
package schemacheck

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// Columns are the tables of an export and their columns, in order: the
// issue's names, plus seq, the *_ms epoch columns and the store's extra
// fields.
var Columns = map[string][]string{
	"sessions": {"id", "started_at", "started_at_ms", "ended_at", "ended_at_ms", "command", "exit_code",
		"policy_sha256", "image", "host", "events", "allowed", "denied", "dns", "net", "model_calls",
		"input_tokens", "output_tokens", "cost_usd", "lost", "exec", "fs", "agent"},
	"net_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "domain", "ip", "port", "src_ip", "src_port",
		"transport", "conn_type", "decision", "reason", "matched_rule", "method", "path", "query", "status_code",
		"bytes_sent", "bytes_received", "duration_ms", "request_headers", "response_headers",
		"request_body_preview", "response_body_preview", "count", "detail"},
	"dns_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "qname", "qtype", "transport", "decision",
		"reason", "matched_rule", "answer", "resolver_asked", "count"},
	"model_calls": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "provider", "domain", "model", "method", "path", "stream",
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
	"fs_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "action", "path", "size",
		"old_path", "is_dir", "guest_time", "guest_time_ms"},
	"exec_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "command", "exit_code", "duration_ms",
		"argv", "dir", "tty", "pid", "signal", "started_at", "started_at_ms"},
	"agent_events":     {"id", "session_id", "seq", "timestamp", "timestamp_ms", "state", "detail", "count"},
	"recording_events": {"id", "session_id", "seq", "timestamp", "timestamp_ms", "state", "detail", "count"},
	"other_events":     {"id", "session_id", "seq", "timestamp", "timestamp_ms", "kind"},
}

// ForeignKeys are "column→table.column" per table, besides session_id →
// sessions.id, which every table but sessions has.
var ForeignKeys = map[string][]string{
	"tool_calls":     {"model_call_id→model_calls.id", "mcp_call_id→mcp_calls.id"},
	"tool_responses": {"model_call_id→model_calls.id"},
}

// SharedSeq are the event tables whose rows come several to a stored
// event and share its seq: the tool calls and tool results of one model
// call. Their (session_id, seq) index is not unique.
var SharedSeq = []string{"tool_calls", "tool_responses"}

// Indexes are the indexed column lists per table ("a,b"; "!" marks
// UNIQUE), besides (session_id, timestamp) and (session_id, seq), which
// every event table has: (session_id, seq) UNIQUE except in the SharedSeq
// tables.
var Indexes = map[string][]string{
	"sessions":       {"!id", "started_at"},
	"net_events":     {"domain", "path"},
	"dns_events":     {"qname"},
	"model_calls":    {"trace_id"},
	"tool_calls":     {"model_call_id", "call_id", "mcp_call_id"},
	"tool_responses": {"model_call_id", "call_id"},
	"fs_events":      {"path"},
}

// Verify checks db against the specification and the given schema version
// and returns every difference it finds (none: the schema is right).
func Verify(db *sql.DB, version int64) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	var v int64
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return []error{err}
	}
	if v != version {
		fail("user_version = %d, want %d", v, version)
	}
	have, err := column(db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return append(errs, err)
	}
	var want []string
	for t := range Columns {
		want = append(want, t)
	}
	slices.Sort(want)
	if !slices.Equal(have, want) {
		fail("tables = %v, want %v", have, want)
	}
	for _, t := range want {
		if !slices.Contains(have, t) {
			continue
		}
		cols, err := column(db, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, t)
		if err != nil {
			return append(errs, err)
		}
		if !slices.Equal(cols, Columns[t]) {
			fail("%s columns = %v, want %v", t, cols, Columns[t])
		}
		pks, err := column(db, `SELECT name FROM pragma_table_info(?) WHERE pk > 0`, t)
		if err != nil {
			return append(errs, err)
		}
		if !slices.Equal(pks, []string{"id"}) {
			fail("%s primary key = %v, want [id]", t, pks)
		}
		fks, err := column(db, `SELECT "from" || '→' || "table" || '.' || "to" FROM pragma_foreign_key_list(?) ORDER BY "from"`, t)
		if err != nil {
			return append(errs, err)
		}
		wantFK := slices.Clone(ForeignKeys[t])
		if t != "sessions" {
			wantFK = append(wantFK, "session_id→sessions.id")
		}
		slices.Sort(wantFK)
		if !slices.Equal(fks, wantFK) {
			fail("%s foreign keys = %v, want %v", t, fks, wantFK)
		}
		ixs, err := indexes(db, t)
		if err != nil {
			return append(errs, err)
		}
		wantIx := Indexes[t]
		switch {
		case slices.Contains(SharedSeq, t):
			wantIx = append(slices.Clone(wantIx), "session_id,timestamp", "session_id,seq")
		case t != "sessions":
			wantIx = append(slices.Clone(wantIx), "session_id,timestamp", "!session_id,seq")
		}
		for _, ix := range wantIx {
			if !slices.Contains(ixs, ix) {
				fail("%s: no index on (%s); have %v", t, ix, ixs)
			}
		}
	}
	return errs
}

func column(db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// indexes lists a table's indexes as "col1,col2", "!" first when UNIQUE.
func indexes(db *sql.DB, table string) ([]string, error) {
	rows, err := db.Query(`SELECT name, "unique" FROM pragma_index_list(?)`, table)
	if err != nil {
		return nil, err
	}
	type ix struct {
		name   string
		unique bool
	}
	var list []ix
	for rows.Next() {
		var i ix
		if err := rows.Scan(&i.name, &i.unique); err != nil {
			rows.Close()
			return nil, err
		}
		list = append(list, i)
	}
	rows.Close()
	var out []string
	for _, i := range list {
		cols, err := column(db, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, i.name)
		if err != nil {
			return nil, err
		}
		key := strings.Join(cols, ",")
		if i.unique {
			key = "!" + key
		}
		out = append(out, key)
	}
	return out, nil
}
