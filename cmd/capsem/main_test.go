package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
	"github.com/capsem/capsem/store/sqliteexport/inspect"
)

func TestExportUsageAndErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.db")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", "--data", dir}, exitUsage, "sqlite"},
		{[]string{"export", "--sqlite", out, "--data", dir, "--all", "--session", "x"}, exitUsage, "not both"},
		{[]string{"export", "--sqlite", out, "--data", dir, "stray"}, exitUsage, "unexpected argument"},
		{[]string{"export", "--sqlite", out, "--data", filepath.Join(dir, "none")}, 1, "none"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"capsem"}, c.args...), &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}

func TestExportNewestSessionByDefault(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"20260101T000000Z-aaaaaa", "20260102T000000Z-bbbbbb"} {
		w, err := st.Begin(store.Session{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		w.Append(store.Event{DNS: &store.DNS{QName: id, QType: "A", Decision: store.Denied}})
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	out := filepath.Join(t.TempDir(), "out.db")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capsem", "export", "--sqlite", out, "--data", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "exported 1 session(s), 1 events") {
		t.Errorf("output %q", stdout.String())
	}
	if code := run([]string{"capsem", "export", "--sqlite", out, "--data", dir}, &stdout, &stderr); code == 0 {
		t.Error("an existing file was overwritten without --force")
	}
	if code := run([]string{"capsem", "export", "--sqlite", out, "--data", dir, "--all", "--force"}, &stdout, &stderr); code != 0 {
		t.Errorf("--all --force: exit %d: %s", code, stderr.String())
	}
}

func TestInspectTextReport(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Begin(store.Session{Command: []string{"capsem-net", "--policy", "p.toml"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{DNS: &store.DNS{QName: "api.example.com", QType: "A", Decision: store.Allowed, Answer: "198.19.0.1"}})
	w.Append(store.Event{DNS: &store.DNS{QName: "evil.example", QType: "TXT", Decision: store.Denied}})
	w.Append(store.Event{Net: &store.Net{Transport: store.TransportTCP, Decision: store.Denied, Reason: "direct-ip", IP: netip.MustParseAddr("203.0.113.9"), Port: 443, Count: 1}})
	w.Append(store.Event{Net: &store.Net{Transport: store.TransportTCP, Decision: store.Allowed, Reason: "allowed", Domain: "api.example.com", Port: 443, BytesSent: 10, BytesReceived: 20}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capsem", "inspect", "--data", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	t.Log("\n" + out)
	for _, want := range []string{`net_events\s+2\n`, `dns_events\s+2\n`, "reason=direct-ip", "domain=api.example.com", "ok   all tables exist", "ok   no orphaned tool_calls"} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	stdout.Reset()
	if code := run([]string{"capsem", "sessions", "--data", dir}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "capsem-net --policy p.toml") {
		t.Errorf("sessions: exit %d\n%s", code, stdout.String())
	}
	if code := run([]string{"capsem", "inspect", "--data", dir, "no-such-session"}, &stdout, &stderr); code == 0 {
		t.Error("inspect of an unknown session succeeded")
	}
}

// TestInspectChecksFail plants an orphaned tool call in an export: the
// check must fail.
func TestInspectChecksFail(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := st.Begin(store.Session{})
	w.End(nil)
	dbPath := filepath.Join(t.TempDir(), "x.db")
	if _, err := sqliteexport.Export(context.Background(), st, dbPath, sqliteexport.Options{}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO tool_calls (session_id, seq, timestamp, timestamp_ms, model_call_id, call_index, call_id, tool_name) SELECT id, 1, started_at, started_at_ms, 999, 0, 'c1', 'bash' FROM sessions`); err != nil {
		t.Fatal(err)
	}
	r, err := buildReport(db, sessionSummary{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, ch := range r.Checks {
		if !ch.OK {
			failed[ch.Name] = true
		}
	}
	if !failed["no orphaned tool_calls"] || !failed["no foreign-key violations"] {
		t.Errorf("checks %+v: want the orphan and FK checks to fail", r.Checks)
	}
	if failed[inspect.ProviderCheck] {
		t.Errorf("provider check failed with no model calls: %+v", r.Checks)
	}
	if _, err := db.Exec(`INSERT INTO model_calls (session_id, seq, timestamp, timestamp_ms, provider, domain)
		SELECT id, 2, started_at, started_at_ms, 'anthropic', 'evil.example' FROM sessions`); err != nil {
		t.Fatal(err)
	}
	if r, err = buildReport(db, sessionSummary{}, 5); err != nil {
		t.Fatal(err)
	}
	for _, ch := range r.Checks {
		if ch.Name == inspect.ProviderCheck && (ch.OK || !strings.Contains(ch.Detail, "evil.example")) {
			t.Errorf("a model call from anthropic on evil.example passed the provider check: %+v", ch)
		}
	}
}

// modelCallSession writes a session in which a streamed anthropic call asks
// for a tool and the next call sends its result back, plus one more result
// answering call id extra (none when empty).
func modelCallSession(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	st, err := openTestStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Begin(store.Session{Command: []string{"claude", "-p", "list the files"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{DNS: &store.DNS{QName: "api.anthropic.com", QType: "A", Decision: store.Allowed, Answer: "198.19.0.1"}})
	w.Append(store.Event{Net: &store.Net{Transport: store.TransportTCP, ConnType: store.ConnHTTPS, Decision: store.Allowed,
		Domain: "api.anthropic.com", Port: 443, Method: "POST", Path: "/v1/messages", StatusCode: 200}})
	w.Append(store.Event{ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-sonnet-4",
		Method: "POST", Path: "/v1/messages", Stream: true, StatusCode: 200, StopReason: "tool_use", InputTokens: 100, OutputTokens: 20,
		ToolCalls: []store.ToolCall{{CallID: "toolu_01", Name: "Bash", Arguments: `{"command":"ls"}`, Origin: "native"}}}})
	results := []store.ToolResult{{CallID: "toolu_01", ContentPreview: "go.mod"}}
	if extra != "" {
		results = append(results, store.ToolResult{CallID: extra, ContentPreview: "?", IsError: true})
	}
	w.Append(store.Event{ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-sonnet-4",
		Method: "POST", Path: "/v1/messages", StatusCode: 200, StopReason: "end_turn", InputTokens: 130, OutputTokens: 5,
		ToolResults: results}})
	code := 0
	if err := w.End(&code); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInspectModelCalls inspects real exported model calls with a linked
// tool call and tool response: every check passes.
func TestInspectModelCalls(t *testing.T) {
	dir := modelCallSession(t, "")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capsem", "inspect", "--data", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	out := stdout.String()
	t.Log("\n" + out)
	for _, want := range []string{`model_calls\s+2\n`, `tool_calls\s+1\n`, `tool_responses\s+1\n`,
		"provider=anthropic", "call_id=toolu_01  tool_name=Bash", "call_id=toolu_01  is_error=0",
		"ok   no orphaned tool_calls", "ok   no orphaned tool_responses", "ok   no foreign-key violations",
		"ok   every tool response answers a tool call", "ok   " + inspect.ProviderCheck} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Error("a check failed")
	}

	stdout.Reset()
	if code := run([]string{"capsem", "inspect", "--data", dir, "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr.String())
	}
	var r report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Rows["model_calls"] != 2 || r.Rows["tool_calls"] != 1 || r.Rows["tool_responses"] != 1 {
		t.Errorf("rows %v", r.Rows)
	}
}

// TestInspectUnansweredToolResponse: a tool response whose call_id matches
// no tool call of the session fails the check, naming the call id.
func TestInspectUnansweredToolResponse(t *testing.T) {
	dir := modelCallSession(t, "toolu_ghost")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capsem", "inspect", "--data", dir}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s\n%s", code, stderr.String(), stdout.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "FAIL every tool response answers a tool call 1 rows: toolu_ghost") {
		t.Errorf("output lacks the failed check naming toolu_ghost:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "1 of 10 checks failed: every tool response answers a tool call") {
		t.Errorf("stderr %q does not say which check failed", stderr.String())
	}
	if n := strings.Count(out, "FAIL"); n != 1 {
		t.Errorf("%d checks failed, want 1:\n%s", n, out)
	}
}
