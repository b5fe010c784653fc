package sqliteexport

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/capsem/capsem/dlp/dlptest"
	"github.com/capsem/capsem/store"
)

// TestScrubExport dlptest.Plants every kind of secret in every text field of
// every kind of event and of the session, exports with Scrub, and checks
// that no secret survives in any text column of any table.
func TestScrubExport(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var texts []string
	for _, p := range dlptest.Plants {
		texts = append(texts, p.Text, "pre "+p.Text+" post", "a\n"+p.Text+"\nb")
	}
	var headers []store.Header
	for _, p := range dlptest.CredentialHeaders {
		name, value, _ := strings.Cut(p.Text, "|")
		headers = append(headers, store.Header{Name: name, Value: value})
	}
	for i, text := range texts {
		sess := store.Session{ID: fmt.Sprintf("s%03d", i)}
		setStrings(&sess, text)
		sess.ID = fmt.Sprintf("s%03d", i)
		sess.Command = []string{"run", text, "--flag=" + text}
		w, err := st.Begin(sess)
		if err != nil {
			t.Fatal(err)
		}
		n := &store.Net{Count: 1}
		setStrings(n, text)
		n.RequestHeaders = append([]store.Header{{Name: "X-Note", Value: text}, {Name: text, Value: "v"}}, headers...)
		n.ResponseHeaders = append([]store.Header{{Name: "Set-Cookie", Value: text}, {Name: "Warning", Value: text}}, headers...)
		w.Append(store.Event{Net: n})
		d := &store.DNS{}
		setStrings(d, text)
		w.Append(store.Event{DNS: d})
		m := &store.ModelCall{Stream: true, InputTokens: 1}
		setStrings(m, text)
		tc, tr := store.ToolCall{Index: 1}, store.ToolResult{IsError: true}
		setStrings(&tc, text)
		setStrings(&tr, text)
		m.ToolCalls = []store.ToolCall{tc, {Name: "plain", Arguments: `{"key":"` + text + `"}`}}
		m.ToolResults = []store.ToolResult{tr, {CallID: "c1", ContentPreview: "output:\n" + text}}
		w.Append(store.Event{ModelCall: m})
		// A command line with the secret in a word, inside a word, and
		// split over several words as a shell would split it.
		x := &store.Exec{TTY: true, PID: 7, ExitCode: 1}
		setStrings(x, text)
		x.Argv = append([]string{"run", text, "--flag=" + text}, strings.Fields(text)...)
		w.Append(store.Event{Exec: x})
		f := &store.FS{Size: 1}
		setStrings(f, text)
		w.Append(store.Event{FS: f})
		a := &store.Agent{Count: 2}
		setStrings(a, text)
		w.Append(store.Event{Agent: a})
		r := &store.Recording{Count: 2}
		setStrings(r, text)
		w.Append(store.Event{Recording: r})
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
	}
	// A session whose id is itself a secret.
	w, err := st.Begin(store.Session{ID: "sk-ant-api03-SessionIdSecret0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{DNS: &store.DNS{QName: "x.test"}})
	w.Append(store.Event{Net: &store.Net{Domain: "x.test"}})
	w.Append(store.Event{ModelCall: &store.ModelCall{Model: "m", ToolCalls: []store.ToolCall{{CallID: "c"}}, ToolResults: []store.ToolResult{{CallID: "c"}}}})
	w.Append(store.Event{Exec: &store.Exec{Argv: []string{"true"}}})
	w.Append(store.Event{FS: &store.FS{Action: store.FSCreated, Path: "x"}})
	w.Append(store.Event{Agent: &store.Agent{State: store.AgentSilent}})
	w.Append(store.Event{Recording: &store.Recording{State: store.RecordingResumed}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}

	out, res := export(t, st, Options{Scrub: true})
	if res.NetEvents != len(texts)+1 || res.DNSEvents != len(texts)+1 ||
		res.ModelCalls != len(texts)+1 || res.ToolCalls != 2*len(texts)+1 || res.ToolResponses != 2*len(texts)+1 ||
		res.ExecEvents != len(texts)+1 || res.FSEvents != len(texts)+1 || res.AgentEvents != len(texts)+1 || res.RecordingEvents != len(texts)+1 {
		t.Fatalf("result %+v", res)
	}
	db := openExport(t, out)

	needles := []string{"SessionIdSecret0123456789"}
	for _, p := range append(dlptest.Plants, dlptest.CredentialHeaders...) {
		needles = append(needles, p.Needles...)
	}
	kinds := map[string]bool{}
	cells := 0
	for _, tbl := range tableNames(t, db) {
		for _, r := range queryRows(t, db, "SELECT * FROM "+tbl) {
			for col, v := range r {
				s, ok := v.(string)
				if !ok {
					continue
				}
				cells++
				for _, n := range needles {
					if strings.Contains(s, n) {
						t.Errorf("%s.%s holds the secret %q: %q", tbl, col, n, s)
					}
				}
				for rest := s; ; {
					_, after, ok := strings.Cut(rest, "[REDACTED:")
					if !ok {
						break
					}
					kind, _, _ := strings.Cut(after, "]")
					kinds[kind] = true
					rest = after
				}
			}
		}
	}
	for _, p := range append(dlptest.Plants, dlptest.CredentialHeaders...) {
		if !kinds[p.Kind] {
			t.Errorf("no [REDACTED:%s] anywhere in the export", p.Kind)
		}
	}
	// Every text column of the event tables was exercised.
	for _, tbl := range []string{"sessions", "net_events", "dns_events", "model_calls", "tool_calls", "tool_responses",
		"exec_events", "fs_events", "agent_events", "recording_events"} {
		for _, c := range pragmaRows(t, db, "table_info('"+tbl+"')") {
			if c["type"] != "TEXT" {
				continue
			}
			col := c["name"].(string)
			if isChainColumn(col) {
				continue // hashes and keys in hex: no text of the guest's in them
			}
			var n int64
			q := fmt.Sprintf("SELECT count(*) FROM %s WHERE %s LIKE '%%[REDACTED:%%'", tbl, col)
			if err := db.QueryRow(q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			// The times and addresses hold no text to plant a secret in.
			if n == 0 && col != "timestamp" && col != "started_at" && col != "ended_at" && col != "guest_time" && col != "ip" && col != "src_ip" && col != "resolver_asked" {
				t.Errorf("%s.%s: no planted secret was redacted there (the test does not cover it)", tbl, col)
			}
		}
	}
	t.Logf("%d text cells checked against %d secrets", cells, len(needles))

	// Without Scrub the secrets are there: the check above can see them.
	raw, _ := export(t, st, Options{})
	for _, q := range []string{
		"SELECT request_headers, request_body_preview FROM net_events",
		"SELECT text_content, usage_details FROM model_calls",
		"SELECT arguments, call_id FROM tool_calls",
		"SELECT content_preview, call_id FROM tool_responses",
		"SELECT command, argv, dir, signal FROM exec_events",
		"SELECT action, path, old_path FROM fs_events",
		"SELECT state, detail FROM agent_events",
		"SELECT state, detail FROM recording_events",
	} {
		found := 0
		for _, r := range queryRows(t, openExport(t, raw), q) {
			for _, n := range needles {
				if strings.Contains(fmt.Sprint(r), n) {
					found++
				}
			}
		}
		if found == 0 {
			t.Errorf("%s: the unscrubbed export holds none of the planted secrets: the test is not planting them", q)
		}
	}
}

// Events that hold no secret are exported the same scrubbed or not, but
// for the stored values, which a scrubbed export leaves out.
func TestScrubLeavesOrdinaryEvents(t *testing.T) {
	st := fillStore(t, 2, 8)
	defer st.Close()
	plain, _ := export(t, st, Options{})
	scrubbed, _ := export(t, st, Options{Scrub: true})
	if !reflect.DeepEqual(dumpWithout(t, openExport(t, plain), "record", "scrubbed"), dumpWithout(t, openExport(t, scrubbed), "record", "scrubbed")) {
		t.Error("scrubbing changed events that hold no secret")
	}
}

// setStrings sets every string field of the struct *v to s.
func setStrings(v any, s string) {
	rv := reflect.ValueOf(v).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.String && f.CanSet() {
			f.SetString(s)
		}
	}
}
