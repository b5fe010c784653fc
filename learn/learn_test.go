package learn

import (
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

func dnsEv(name string, allowed bool) store.Event {
	d, r := store.Denied, "denied-name"
	if allowed {
		d, r = store.Allowed, "allowed-name"
	}
	return store.Event{DNS: &store.DNS{QName: name, QType: "A", Decision: d, Reason: r}}
}

func flowEv(name string, port uint16) store.Event {
	return store.Event{Net: &store.Net{Domain: name, Port: port, Decision: store.Allowed, Reason: "allowed"}}
}

func reqEv(method, path string) store.Event {
	return store.Event{Net: &store.Net{Domain: "api.test", Port: 443, Method: method, Path: path, Decision: store.Allowed, Reason: "allowed"}}
}

func TestSuggestWildcards(t *testing.T) {
	tests := []struct {
		events []store.Event
		want   []string // lines the suggestion holds
		not    []string // and does not
		why    string
	}{
		{
			[]store.Event{flowEv("a.cdn.test", 443), flowEv("b.cdn.test", 443), flowEv("c.cdn.test", 443)},
			[]string{`"*.cdn.test", # 3 events; 3 names under cdn.test were used (a.cdn.test, b.cdn.test, c.cdn.test): 3 siblings make a wildcard`},
			[]string{`"a.cdn.test"`},
			"three siblings make a wildcard",
		},
		{
			[]store.Event{flowEv("a.cdn.test", 443), flowEv("b.cdn.test", 443)},
			[]string{`"a.cdn.test"`, `"b.cdn.test"`},
			[]string{`*.cdn.test`},
			"two are chance",
		},
		{
			[]store.Event{flowEv("a.cdn.test", 443), flowEv("b.cdn.test", 443), flowEv("c.cdn.test", 443), dnsEv("evil.cdn.test", false)},
			[]string{`"a.cdn.test"`, `"c.cdn.test"`},
			[]string{`*.cdn.test`},
			"a refused sibling keeps the names exact",
		},
		{
			[]store.Event{flowEv("a.test", 443), flowEv("b.test", 443), flowEv("c.test", 443)},
			[]string{`"a.test"`},
			[]string{`*.test`},
			"never a wildcard over a top-level domain",
		},
		{
			[]store.Event{flowEv("a.cdn.test", 443), flowEv("b.cdn.test", 8080), flowEv("c.cdn.test", 443)},
			[]string{`"a.cdn.test"`, `"b.cdn.test:8080"`},
			[]string{`*.cdn.test`},
			"siblings on other ports are not one pattern",
		},
		{
			[]store.Event{dnsEv("only.test", true)},
			[]string{`"only.test", # 1 DNS answer; resolved, never connected to`},
			nil,
			"a name resolved only is allowed (on 443, as an entry without a port)",
		},
	}
	for _, tc := range tests {
		checkSuggestion(t, tc.events, tc.want, tc.not, tc.why)
	}
}

// checkSuggestion learns from events and wants the suggestion to hold
// each of want, none of not, and to reproduce every decision.
func checkSuggestion(t *testing.T, events []store.Event, want, not []string, why string) {
	t.Helper()
	rec := NewRecord()
	for _, ev := range events {
		rec.Add("s1", ev)
	}
	s, err := Suggest(rec, Options{})
	if err != nil {
		t.Fatalf("%s: %v\n%s", why, err, s.Text)
	}
	for _, w := range want {
		if !strings.Contains(string(s.Text), w) {
			t.Errorf("%s: no %q in\n%s", why, w, s.Text)
		}
	}
	for _, n := range not {
		if strings.Contains(string(s.Text), n) {
			t.Errorf("%s: %q in\n%s", why, n, s.Text)
		}
	}
	if len(s.Remaining) != 0 {
		t.Errorf("%s: the suggestion decides otherwise: %v", why, s.Remaining)
	}
}

func TestSuggestHTTP(t *testing.T) {
	narrow := []store.Event{reqEv("GET", "/repos/a/b/issues"), reqEv("GET", "/repos/c/d"), reqEv("POST", "/graphql")}
	wide := []store.Event{}
	for _, p := range []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g"} {
		wide = append(wide, reqEv("GET", p))
	}
	tests := []struct {
		events []store.Event
		want   []string
		not    []string
		why    string
	}{
		{narrow, []string{`paths = ["/repos/a/*", "/repos/c/*"]`, `paths = ["/graphql"]`, "action = \"deny\""}, nil, "few prefixes: allow them, deny the rest"},
		{wide, []string{"spread over more than 6 path prefixes"}, []string{"action = \"deny\""}, "seven prefixes say little more than [network]"},
		{[]store.Event{reqEv("GET", "/a b/%zz"), reqEv("GET", `/q"x`)}, []string{`paths = ["/*"]`}, []string{"%", `q"`}, "a character a pattern cannot hold ends the prefix: it never reaches the file"},
	}
	for _, tc := range tests {
		checkSuggestion(t, tc.events, tc.want, tc.not, tc.why)
	}
}

// The base's secrets keep only the hosts the session reached; one none
// of whose hosts was reached keeps them all; the MCP gateway's name is
// never an allow entry (capsem serves it).
func TestSuggestSecretsAndGateway(t *testing.T) {
	rec := NewRecord()
	for _, ev := range []store.Event{flowEv("api.test", 443), flowEv("mcp.capsem.internal", 443)} {
		rec.Add("s1", ev)
	}
	s, err := Suggest(rec, Options{BaseName: "base.toml", Base: `[network]
allow = ["api.test", "unused.test"]

[[secret]]
name = "K"
from_env = "K"
hosts = ["api.test", "other.test"]

[[secret]]
name = "G"
from_env = "G"
hosts = ["*.gh.test"]
in = ["header"]
`})
	if err != nil {
		t.Fatal(err)
	}
	text := string(s.Text)
	for _, want := range []string{
		"[[secret]] # its hosts reached: api.test",
		"name = \"K\"\nfrom_env = \"K\"\nhosts = [\"api.test\"]",
		"[[secret]] # none of its hosts was reached in the sessions: all kept\nname = \"G\"\nfrom_env = \"G\"\nhosts = [\"*.gh.test\"]\nin = [\"header\"]",
		"# mcp.capsem.internal was served by the session policy's [mcp.servers]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	for _, not := range []string{`"unused.test"`, `"other.test"`, `  "mcp.capsem.internal"`} {
		if strings.Contains(text, not) {
			t.Errorf("%s in\n%s", not, text)
		}
	}
}

// A tool the guest named "*" is never written into a rule, where it would
// be a glob allowing every tool: [mcp] unknown stays as it was, so the
// call is still allowed, and the comment says why.
func TestSuggestStarTool(t *testing.T) {
	call := func(tool string) store.Event {
		return store.Event{MCPCall: &store.MCPCall{ServerName: "api.test/mcp", Method: "tools/call", ToolName: tool, Decision: store.Allowed, Reason: "allowed"}}
	}
	checkSuggestion(t, []store.Event{flowEv("api.test", 443), call("*"), call("echo")},
		[]string{`# MCP tool "*" of "api.test": 1 call; a "*" in its name would be a glob`, `tools = ["echo"]`},
		[]string{`tools = ["*"]`, `unknown = "deny"`}, "a glob from the guest never reaches a rule")
}
