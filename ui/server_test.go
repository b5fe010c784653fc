package ui

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

const testToken = "0123456789abcdef0123456789abcdef"

// testStore is a real store with one session: DNS, an allowed flow and
// request, a denied request with its rule, a model call whose tool call is
// answered two events later, an MCP call, exec and fs events, and guest
// text that is markup.
func testStore(t *testing.T, extra int) (*store.Store, string) {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Begin(store.Session{Command: []string{"claude", "-p", "<b>hi</b>"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ip := netip.MustParseAddr("198.19.0.5")
	evs := []store.Event{
		{DNS: &store.DNS{QName: "api.anthropic.com", QType: "A", Decision: store.Allowed, Answer: "198.19.0.5"}},
		{DNS: &store.DNS{QName: "evil.test", QType: "A", Decision: store.Denied, Reason: "name-not-allowed", Answer: "NXDOMAIN"}},
		{Net: &store.Net{Domain: "api.anthropic.com", IP: ip, Port: 443, Transport: store.TransportTCP, ConnType: store.ConnHTTPS, Decision: store.Allowed, BytesSent: 2048, BytesReceived: 4096}},
		{Net: &store.Net{Domain: "api.anthropic.com", IP: ip, Port: 443, Transport: store.TransportTCP, Method: "GET", Path: "/admin/<script>alert(1)</script>", StatusCode: 403,
			Decision: store.Denied, Reason: "http-denied", MatchedRule: "http[1] (line 7)", HTTPVersion: store.HTTP2}},
		{ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-opus-5-5", InputTokens: 42, OutputTokens: 17, CostUSD: 0.0123,
			StopReason: "tool_use", TextContent: "I will run the tool.",
			ToolCalls: []store.ToolCall{{CallID: "toolu_1", Name: "Bash", Arguments: `{"command":"ls <dir>"}`, Origin: "native"}}}},
		{Exec: &store.Exec{Argv: []string{"ls", "-la"}, ExitCode: 0, Duration: 12 * time.Millisecond}},
		{ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-opus-5-5", InputTokens: 60, OutputTokens: 5, CostUSD: 0.01,
			StopReason: "end_turn", ToolResults: []store.ToolResult{{CallID: "toolu_1", ContentPreview: "notes.md\nsrc"}}}},
		{MCPCall: &store.MCPCall{ServerName: "tools", Method: "tools/call", ToolName: "env", Decision: store.Denied, Reason: "mcp-tool-denied", MatchedRule: "mcp.rules[1] (line 12)"}},
		{FS: &store.FS{Action: store.FSCreated, Path: "notes.md", Size: 6}},
	}
	for i := 0; i < extra; i++ {
		evs = append(evs, store.Event{FS: &store.FS{Action: store.FSModified, Path: fmt.Sprintf("bulk/%d.txt", i)}})
	}
	for i, ev := range evs {
		ev.Time = at.Add(time.Duration(i) * time.Millisecond)
		w.Append(ev)
	}
	if err := w.End(new(int)); err != nil {
		t.Fatal(err)
	}
	sessions, err := st.Sessions()
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions %v %v", sessions, err)
	}
	return st, sessions[0].ID
}

func testServer(t *testing.T, st Source) *httptest.Server {
	t.Helper()
	s, err := New(st, testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, host string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestAccessIsTokenAndLoopbackOnly(t *testing.T) {
	st, id := testStore(t, 0)
	srv := testServer(t, st)
	for _, c := range []struct {
		path, host string
		code       int
		why        string
	}{
		{"/" + testToken + "/", "", 200, "the token, from loopback"},
		{"/" + testToken + "/s/" + id, "localhost:1234", 200, "localhost is loopback"},
		{"/" + testToken, "", 200, "without the slash: redirected to the list"},
		{"/", "", 403, "no token"},
		{"/" + strings.Repeat("0", 32) + "/", "", 403, "another token"},
		{"/" + testToken + "x/", "", 403, "the token with more after it"},
		{"/s/" + id, "", 403, "a session without the token"},
		{"/" + testToken + "/", "rebind.example:8080", 421, "DNS rebinding: another site's name for 127.0.0.1"},
		{"/" + testToken + "/", "192.168.1.5:8080", 421, "a LAN address"},
	} {
		code, h, body := get(t, srv.URL+c.path, c.host)
		if code != c.code {
			t.Errorf("%s: GET %s Host %q: %d, want %d: %.200s", c.why, c.path, c.host, code, c.code, body)
		}
		if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: security headers missing: %v", c.why, h)
		}
		if c.code != 200 && strings.Contains(body, id) {
			t.Errorf("%s: a refused request shows the session", c.why)
		}
	}
}

func TestSessionPages(t *testing.T) {
	st, id := testStore(t, 0)
	srv := testServer(t, st)
	base := srv.URL + "/" + testToken + "/"
	_, _, list := get(t, base, "")
	for _, want := range []string{id, "claude -p &lt;b&gt;hi&lt;/b&gt;", "$0.0223"} {
		if !strings.Contains(list, want) {
			t.Errorf("the session list lacks %q:\n%s", want, list)
		}
	}
	_, _, page := get(t, base+"s/"+id, "")
	for _, c := range []struct{ want, why string }{
		{"/admin/&lt;script&gt;alert(1)&lt;/script&gt;", "guest text is escaped"},
		{"http-denied", "a denied request shows its reason"},
		{"http[1] (line 7)", "and its rule"},
		{"mcp.rules[1] (line 12)", "a denied MCP call shows its rule"},
		{"Bash({&#34;command&#34;:&#34;ls &lt;dir&gt;&#34;})", "a tool call with its arguments"},
		{"created notes.md", "a file event"},
		{`href="/` + testToken + `/s/` + id + `/m/5"`, "the model call links to its page"},
	} {
		if !strings.Contains(page, c.want) {
			t.Errorf("%s: the session page lacks %q", c.why, c.want)
		}
	}
	if strings.Contains(page, "<script>alert") {
		t.Errorf("guest markup reached the page unescaped")
	}
	_, _, m := get(t, base+"s/"+id+"/m/5", "")
	for _, want := range []string{"claude-opus-5-5", "42 / 17", "$0.0123", "tool_use", "notes.md\nsrc", "answered in"} {
		if !strings.Contains(m, want) {
			t.Errorf("the model call page lacks %q:\n%s", want, m)
		}
	}
	for _, c := range []struct {
		path string
		code int
	}{{"s/nosuch", 404}, {"s/" + id + "/m/6", 404}, {"s/" + id + "/m/99", 404}, {"s/" + id + "/m/x", 400}} {
		if code, _, body := get(t, base+c.path, ""); code != c.code {
			t.Errorf("GET %s: %d, want %d: %s", c.path, code, c.code, body)
		}
	}
	_, _, hosts := get(t, base+"s/"+id+"/hosts", "")
	if !strings.Contains(hosts, "api.anthropic.com") || !strings.Contains(hosts, "6.0 KiB") || !strings.Contains(hosts, "evil.test") {
		t.Errorf("the host summary: %s", hosts)
	}
}

// TestFiltersAndPaging: filters by kind, decision, host and text; a long
// session comes a page at a time, each page saying where the next starts.
func TestFiltersAndPaging(t *testing.T) {
	st, id := testStore(t, 450)
	srv := testServer(t, st)
	base := srv.URL + "/" + testToken + "/s/" + id
	count := func(body string) int { return strings.Count(body, `<tr class="ev `) }
	for _, c := range []struct {
		query string
		rows  int
		why   string
	}{
		{"kind=http", 1, "HTTP requests only"},
		{"kind=http&kind=mcp", 2, "two kinds"},
		{"decision=denied", 3, "denied: a name, a request, an MCP call"},
		{"decision=denied&kind=dns", 1, "denied DNS"},
		{"host=anthropic.com", 6, "a host suffix: its DNS, flow, request, two model calls and the tool call"},
		{"q=bulk/44", 11, "text: bulk/44 and bulk/440…449"},
		{"kind=tool", 1, "the tool call row"},
	} {
		_, _, body := get(t, base+"?"+c.query, "")
		if n := count(body); n != c.rows {
			t.Errorf("%s (?%s): %d rows, want %d", c.why, c.query, n, c.rows)
		}
	}
	// 460 events, 461 rows (the model call has a tool row): pages of 200.
	_, _, first := get(t, base, "")
	if n := count(first); n != pageRows {
		t.Errorf("the first page has %d rows, want %d", n, pageRows)
	}
	after, total := "0", 0
	for i := 0; i < 5; i++ {
		code, h, body := get(t, base+"/rows?after="+after, "")
		if code != 200 {
			t.Fatalf("rows: %d %s", code, body)
		}
		total += count(body)
		after = h.Get("X-Capsem-Next")
		if h.Get("X-Capsem-Done") == "1" {
			break
		}
	}
	if total != 460 || after != "459" {
		t.Errorf("paging read %d rows ending after event %s, want 460 rows (one event has two) and 459", total, after)
	}
}
