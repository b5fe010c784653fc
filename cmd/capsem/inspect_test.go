package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
)

// mcpLinkExport exports a session in which claude asks for two MCP tools
// of the gateway server gw and the gateway carries both, and opens the
// file for writing.
func mcpLinkExport(t *testing.T) *sql.DB {
	t.Helper()
	st, err := openTestStore(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Begin(store.Session{Command: []string{"claude"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	w.Append(store.Event{Time: at, ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Method: "POST", Path: "/v1/messages", StopReason: "tool_use",
		ToolCalls: []store.ToolCall{
			{CallID: "toolu_01", Name: "mcp__gw__echo", Arguments: `{"text":"hi"}`, Origin: "mcp"},
			{CallID: "toolu_02", Name: "mcp__gw__read_file", Arguments: `{"path":"a"}`, Origin: "mcp", Index: 1},
		}}})
	w.Append(store.Event{Time: at.Add(time.Second), MCPCall: &store.MCPCall{ServerName: "gw", Method: "tools/call", ToolName: "echo", RequestID: "1", Decision: store.Allowed}})
	w.Append(store.Event{Time: at.Add(2 * time.Second), MCPCall: &store.MCPCall{ServerName: "gw", Method: "tools/call", ToolName: "read_file", RequestID: "2", Decision: store.Allowed}})
	w.Append(store.Event{Time: at.Add(3 * time.Second), MCPCall: &store.MCPCall{ServerName: "gw", Method: "tools/list", RequestID: "3", Decision: store.Allowed}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(t.TempDir(), "x.db")
	res, err := sqliteexport.Export(context.Background(), st, dbPath, sqliteexport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.MCPLinks != 2 {
		t.Fatalf("the export linked %d tool calls, want 2", res.MCPLinks)
	}
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// failedChecks runs the report's checks on db and returns the failed ones
// by name, with their detail.
func failedChecks(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	r, err := buildReport(db, sessionSummary{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, ch := range r.Checks {
		if !ch.OK {
			failed[ch.Name] = ch.Detail
		}
	}
	return failed
}

// TestInspectMCPLinks: the links the exporter makes pass the checks; a
// link hand-edited to the wrong tool, to a call that is not tools/call, or
// to an MCP call another tool call has, is reported.
func TestInspectMCPLinks(t *testing.T) {
	const toolCheck, twiceCheck = "every mcp_call_id names a tools/call of its tool", "no MCP call linked to two tool calls"
	for _, c := range []struct {
		edit   string
		failed map[string]string // check → a word its detail has
		why    string
	}{
		{"", nil, "as exported: each tool call names its own tools/call"},
		{`UPDATE tool_calls SET mcp_call_id = (SELECT id FROM mcp_calls WHERE tool_name = 'read_file') WHERE call_id = 'toolu_01'`,
			map[string]string{toolCheck: "mcp__gw__echo -> read_file", twiceCheck: "1 rows"},
			"echo linked to the read_file call, which toolu_02 has too"},
		{`UPDATE tool_calls SET mcp_call_id = (SELECT id FROM mcp_calls WHERE method = 'tools/list') WHERE call_id = 'toolu_02'`,
			map[string]string{toolCheck: "mcp__gw__read_file -> ?"}, "a tools/list carries no tool call"},
		{`UPDATE tool_calls SET mcp_call_id = 99 WHERE call_id = 'toolu_02'`,
			map[string]string{toolCheck: "1 rows", "no foreign-key violations": "1 rows"}, "a link to no mcp_calls row"},
		{`UPDATE mcp_calls SET tool_name = 'write_file' WHERE tool_name = 'read_file'`,
			map[string]string{toolCheck: "mcp__gw__read_file -> write_file"}, "the MCP call's tool is not the one the model named"},
	} {
		db := mcpLinkExport(t)
		if c.edit != "" {
			if _, err := db.Exec(c.edit); err != nil {
				t.Fatalf("%s: %v", c.why, err)
			}
		}
		failed := failedChecks(t, db)
		for name, word := range c.failed {
			detail, ok := failed[name]
			if !ok || !strings.Contains(detail, word) {
				t.Errorf("%s: check %q failed=%v detail %q, want it to fail naming %q", c.why, name, ok, detail, word)
			}
		}
		for name, detail := range failed {
			if _, ok := c.failed[name]; !ok {
				t.Errorf("%s: check %q failed: %s", c.why, name, detail)
			}
		}
	}
}

// TestInspectSQLite: inspect --sqlite reads an export: the session's
// summary from its sessions row, the checks on the file; an edit that
// breaks a check makes it exit 1; a file that is no export, or a session
// it does not hold, is an error saying so.
func TestInspectSQLite(t *testing.T) {
	db := mcpLinkExport(t)
	var file, id string
	if err := db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT id FROM sessions`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args     []string
		code     int
		want     string
		why      string
		breakRow bool
	}{
		{[]string{"inspect", "--sqlite", file}, 0, id, "the newest session, every check ok", false},
		{[]string{"inspect", "--sqlite", file, "--json", id}, 0, `"command": [`, "a session by id, as JSON", false},
		{[]string{"inspect", "--sqlite", file, "nosuch"}, 1, "no session nosuch in it", "an id the file does not hold", false},
		{[]string{"inspect", "--sqlite", filepath.Join(t.TempDir(), "none.db")}, 1, "--sqlite", "no such file", false},
		{[]string{"inspect", "--sqlite", file}, 1, "checks failed", "a tool call linked to no MCP call", true},
	} {
		if c.breakRow {
			if _, err := db.Exec(`UPDATE tool_calls SET mcp_call_id = 99 WHERE call_id = 'toolu_02'`); err != nil {
				t.Fatal(err)
			}
		}
		var out strings.Builder
		code := run(append([]string{"capsem"}, c.args...), &out, &out)
		if code != c.code || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: capsem %s: exit %d, want %d with %q:\n%s", c.why, strings.Join(c.args, " "), code, c.code, c.want, out.String())
		}
	}
}
