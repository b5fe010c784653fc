package mcpgate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

func TestCapRecord(t *testing.T) {
	longName := strings.Repeat("é", store.MCPMaxToolBytes)
	for _, tc := range []struct {
		name  string
		in    store.MCPCall
		check func(c store.MCPCall) bool
		why   string
	}{
		{"short fields kept", store.MCPCall{ToolName: "echo", RequestID: `"a"`, ErrorMessage: "boom"},
			func(c store.MCPCall) bool {
				return c.ToolName == "echo" && c.RequestID == `"a"` && c.ErrorMessage == "boom"
			},
			"fields within their caps are recorded whole"},
		{"long tool name", store.MCPCall{ToolName: longName},
			func(c store.MCPCall) bool {
				return len(c.ToolName) <= store.MCPMaxToolBytes && strings.HasPrefix(longName, c.ToolName) && len(c.ToolName) > store.MCPMaxToolBytes-2
			},
			"a guest's tool name is cut at the MITM's cap, on a rune boundary"},
		{"long string id", store.MCPCall{RequestID: `"` + strings.Repeat(`a\"`, 200) + `"`},
			func(c store.MCPCall) bool {
				return len(c.RequestID) <= store.MCPMaxIDBytes && json.Valid([]byte(c.RequestID))
			},
			"a long string id is cut and stays a JSON string"},
		{"long number id", store.MCPCall{RequestID: "1." + strings.Repeat("5", 300) + "e3"},
			func(c store.MCPCall) bool {
				return len(c.RequestID) <= store.MCPMaxIDBytes && json.Valid([]byte(c.RequestID))
			},
			"a long number id is cut and stays a JSON number"},
		{"long error", store.MCPCall{ErrorMessage: strings.Repeat("x", 5000)},
			func(c store.MCPCall) bool { return len(c.ErrorMessage) == 100 },
			"an error message (a refusal naming the tool, a server's text) is cut at the preview size"},
	} {
		c := tc.in
		capRecord(&c, 100)
		if !tc.check(c) {
			t.Errorf("%s: %+v: %s", tc.name, c, tc.why)
		}
	}
}

func FuzzCapID(f *testing.F) {
	for _, s := range []string{`1`, `"a"`, `"` + strings.Repeat(`\u00e9`, 60) + `"`, strings.Repeat("9", 200), `-1.` + strings.Repeat("0", 200) + `e-5`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id := peekID([]byte(`{"id":` + raw + `}`))
		if id == "" {
			return
		}
		got := capID(id)
		if len(got) > store.MCPMaxIDBytes || (got != "" && !json.Valid([]byte(got))) {
			t.Errorf("capID(%q) = %q", id, got)
		}
	})
}
