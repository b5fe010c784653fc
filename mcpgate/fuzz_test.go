package mcpgate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPeekID(t *testing.T) {
	for _, tc := range []struct {
		body, want, why string
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, "7", "a number id is kept as sent"},
		{`{"jsonrpc":"2.0","id":"a-1","method":"ping"}`, `"a-1"`, "a string id keeps its quotes"},
		{`{"jsonrpc":"2.0","id": -1.5e3 ,"method":"ping"}`, "-1.5e3", "a number keeps its form"},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "a notification has no id"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "", "a null id is none"},
		{`{"id":{"x":1}}`, "", "an object is no id"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "a batch has no single id"},
		{`{"id":1`, "", "garbage has none"},
	} {
		if got := peekID([]byte(tc.body)); got != tc.want {
			t.Errorf("peekID(%s) = %q, want %q: %s", tc.body, got, tc.want, tc.why)
		}
	}
}

func FuzzPeekID(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`, `{"id":"x"}`, `[]`, `{"id":1e400}`, `{"id":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id := peekID(body)
		if id != "" && !json.Valid([]byte(id)) {
			t.Errorf("peekID(%q) = %q: not JSON", body, id)
		}
	})
}

func TestServerName(t *testing.T) {
	for _, tc := range []struct {
		path, want string
		ok         bool
		why        string
	}{
		{"/github", "github", true, "the URL the guest is told"},
		{"/github/mcp", "github", true, "more path is ignored"},
		{"/", "", false, "no name"},
		{"", "", false, "no path"},
		{"//x", "", false, "an empty first segment is no name"},
	} {
		if got, ok := serverName(tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("serverName(%q) = %q, %v; want %q, %v: %s", tc.path, got, ok, tc.want, tc.ok, tc.why)
		}
	}
}

func FuzzServerName(f *testing.F) {
	for _, s := range []string{"/a", "/a/b", "/", "", "//", "/ä/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		name, ok := serverName(path)
		if ok != (name != "") || strings.Contains(name, "/") {
			t.Errorf("serverName(%q) = %q, %v", path, name, ok)
		}
	})
}

func TestPreview(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
		why  string
	}{
		{"abc", 5, "abc", "short text is whole"},
		{"abcdef", 3, "abc", "long text is cut"},
		{"aé", 2, "a", "a rune is never split"},
	} {
		if got := preview([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("preview(%q, %d) = %q, want %q: %s", tc.in, tc.n, got, tc.want, tc.why)
		}
	}
}
