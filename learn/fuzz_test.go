package learn

import (
	"testing"
	"unicode/utf8"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// FuzzSuggest learns from a session whose names, paths and MCP tools (the
// guest's to choose) are anything: the suggestion always parses and
// allows everything the session was allowed, whatever the strings hold.
func FuzzSuggest(f *testing.F) {
	f.Add("api.test", "/v1/messages", "echo", "srv.test/mcp")
	f.Add("a.b.test", "/x\"]\n[network]\nallow=[\"evil\"]", "t\"\n[[http]]", "h/p")
	f.Add("x.test", "/a b/%zz/*/..", "*", "srv.test")
	f.Fuzz(func(t *testing.T, name, path, tool, server string) {
		rec := NewRecord()
		rec.Add("s", store.Event{DNS: &store.DNS{QName: name, QType: "A", Decision: store.Allowed, Reason: "allowed-name"}})
		rec.Add("s", store.Event{Net: &store.Net{Domain: name, Port: 443, Decision: store.Allowed, Reason: "allowed"}})
		rec.Add("s", store.Event{Net: &store.Net{Domain: name, Port: 443, Method: "GET", Path: path, Decision: store.Allowed, Reason: "allowed"}})
		rec.Add("s", store.Event{MCPCall: &store.MCPCall{ServerName: server, Method: "tools/call", ToolName: tool, Decision: store.Allowed, Reason: "allowed"}})
		s, err := Suggest(rec, Options{})
		if err != nil {
			t.Fatalf("%v\n%s", err, s.Text)
		}
		if policy.CheckEntry(name) != nil {
			return // no policy allows such a name: no session records it allowed
		}
		for _, c := range s.Remaining {
			if c.Kind == KindMCP && (!utf8.ValidString(tool) || !utf8.ValidString(server)) {
				continue // what a TOML file cannot hold stays refused, and the comment says so
			}
			if c.Allowed {
				t.Fatalf("the suggestion refuses what the session was allowed: %s\n%s", c, s.Text)
			}
		}
	})
}
