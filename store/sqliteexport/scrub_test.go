package sqliteexport

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

// A plant is a piece of text holding a secret; none of its needles may
// survive scrubbing, and the text must be redacted as kind.
type plant struct {
	kind    string
	text    string
	needles []string
}

var plants = []plant{
	{"anthropic-key", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEf", []string{"AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"}},
	{"openai-key", "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe", []string{"Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"}},
	{"openai-key", "sk-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12", []string{"Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12"}},
	{"google-key", "AIzaSyD-1234567890abcdefghijklmnopqrstu", []string{"SyD-1234567890abcdefghijklmnopqrstu"}},
	{"github-token", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", []string{"1234567890abcdefghijklmnopqrstuvwxyzAB"}},
	{"github-token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS", []string{"11ABCDEFG0123456789_abcdefghij"}},
	{"aws-key", "AKIAIOSFODNN7EXAMPLE", []string{"IOSFODNN7EXAMPLE"}},
	{"aws-key", "ASIAY34FZKBOKMUTVV7A", []string{"Y34FZKBOKMUTVV7A"}},
	{"slack-token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", []string{"123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"}},
	{"slack-token", "xoxp-2222222222-3333333333-abcdefabcdef", []string{"2222222222-3333333333-abcdefabcdef"}},
	{"bearer", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		[]string{"eyJhbGciOiJIUzI1NiJ9", "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"}},
	{"bearer", "bearer opaque-token-QwErTy123456", []string{"opaque-token-QwErTy123456"}},
	{"authorization", "Authorization: Basic dXNlcjpwYXNzd29yZA==", []string{"dXNlcjpwYXNzd29yZA"}},
	{"authorization", `{"authorization": "Token tok-8s7d6f5g4h3j"}`, []string{"tok-8s7d6f5g4h3j"}},
	{"authorization", "proxy-authorization: Digest pr0xy-s3cret", []string{"pr0xy-s3cret"}},
	{"x-api-key", "x-api-key: plainkey-0f9e8d7c6b5a", []string{"plainkey-0f9e8d7c6b5a"}},
	{"x-api-key", `{\"x-api-key\":\"esc4ped-k3y-value\"}`, []string{"esc4ped-k3y-value"}},
	{"x-api-key", "/v1/x?x-api-key=qu3ry-k3y-123&other=1", []string{"qu3ry-k3y-123"}},
	{"cookie", "Cookie: session=c00kie-v4lue-123; theme=dark", []string{"c00kie-v4lue-123"}},
	{"set-cookie", "Set-Cookie: sid=s3tc00kie-999; HttpOnly; Secure", []string{"s3tc00kie-999"}},
	{"private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98pemKeyBody\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n-----END RSA PRIVATE KEY-----",
		[]string{"MIIEowIBAAKCAQEA7bq98pemKeyBody", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo"}},
	{"private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", // cut off by a preview limit
		[]string{"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"}},
	{"private-key", "-----BEGIN PRIVATE KEY-----\r\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49Awe\r\n-----END PRIVATE KEY-----", []string{"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49Awe"}},
}

// credentialHeaders are header values that are secrets only because of the
// header they are in.
var credentialHeaders = []plant{
	{"authorization", "Authorization|Basic dXNlcjpwYXNzd29yZA==", []string{"dXNlcjpwYXNzd29yZA"}},
	{"authorization", "proxy-authorization|Negotiate bmVnb3RpYXRlLXRva2Vu", []string{"bmVnb3RpYXRlLXRva2Vu"}},
	{"x-api-key", "X-Api-Key|plainkey-0f9e8d7c6b5a", []string{"plainkey-0f9e8d7c6b5a"}},
	{"x-api-key", "x-goog-api-key|g00gheaderval", []string{"g00gheaderval"}},
	{"cookie", "Cookie|session=c00kie-v4lue-123; theme=dark", []string{"c00kie-v4lue-123"}},
	{"set-cookie", "Set-Cookie|sid=s3tc00kie-999; HttpOnly", []string{"s3tc00kie-999"}},
}

func TestScrubEachKind(t *testing.T) {
	for _, p := range plants {
		for _, wrap := range []string{"%s", "before %s after", "line one\n%s\nline three", `{"k":"%s"}`, "x=%s&y=2"} {
			in := fmt.Sprintf(wrap, p.text)
			got := Scrub(in)
			for _, n := range p.needles {
				if strings.Contains(got, n) {
					t.Errorf("Scrub(%q) = %q: %q survives", in, got, n)
				}
			}
			if !strings.Contains(got, "[REDACTED:"+p.kind+"]") {
				t.Errorf("Scrub(%q) = %q: no [REDACTED:%s]", in, got, p.kind)
			}
			if again := Scrub(got); again != got {
				t.Errorf("Scrub is not idempotent: %q then %q", got, again)
			}
		}
	}
}

func TestScrubExact(t *testing.T) {
	for in, want := range map[string]string{
		"Authorization: Bearer sk-ant-api03-xxxxxxxxxxxxxxxx\r\nHost: a": "Authorization: [REDACTED:authorization]\r\nHost: a",
		"curl -H 'Authorization: Bearer abcdefgh12345678' https://x":     "curl -H 'Authorization: [REDACTED:authorization]",
		"use Bearer abcdefgh12345678 here":                               "use Bearer [REDACTED:bearer] here",
		"key=AIzaSyD-1234567890abcdefghijklmnopqrstu&q=1":                "key=[REDACTED:google-key]&q=1",
		"sk-ant-api03-aaaaaaaaaaaa.exfil.example.com":                    "[REDACTED:anthropic-key].exfil.example.com",
		`{"x-api-key":"k123","model":"m"}`:                               `{"x-api-key":"[REDACTED:x-api-key]","model":"m"}`,
	} {
		if got := Scrub(in); got != want {
			t.Errorf("Scrub(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

// TestScrubLeavesOrdinaryText guards against redacting what is not a
// secret: the typical events come out of a scrubbed export unchanged.
func TestScrubLeavesOrdinaryText(t *testing.T) {
	for _, s := range []string{
		"", "/v1/messages", "api.anthropic.com", "risk-management-strategies-for-2026", "task-runner",
		"our cookie policy", "the bearer of bad news", "Bearer tokens are short", "Content-Type: application/json",
		`{"model":"claude-sonnet-4","max_tokens":1024}`, "ghost_town", "AKIA", "xoxo", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"NXDOMAIN", "198.19.0.7", "ok\uFFFDend", "é日本",
	} {
		if got := Scrub(s); got != s {
			t.Errorf("Scrub(%q) = %q, want it unchanged", s, got)
		}
	}
	st := fillStore(t, 2, 8)
	defer st.Close()
	plain, _ := export(t, st, Options{})
	scrubbed, _ := export(t, st, Options{Scrub: true})
	if !reflect.DeepEqual(dump(t, openExport(t, plain)), dump(t, openExport(t, scrubbed))) {
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

// TestScrubExport plants every kind of secret in every text field of
// every kind of event and of the session, exports with Scrub, and checks
// that no secret survives in any text column of any table.
func TestScrubExport(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var texts []string
	for _, p := range plants {
		texts = append(texts, p.text, "pre "+p.text+" post", "a\n"+p.text+"\nb")
	}
	var headers []store.Header
	for _, p := range credentialHeaders {
		name, value, _ := strings.Cut(p.text, "|")
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
	for _, p := range append(plants, credentialHeaders...) {
		needles = append(needles, p.needles...)
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
	for _, p := range append(plants, credentialHeaders...) {
		if !kinds[p.kind] {
			t.Errorf("no [REDACTED:%s] anywhere in the export", p.kind)
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
