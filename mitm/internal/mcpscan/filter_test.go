package mcpscan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestFilterTools(t *testing.T) {
	hide := func(name string) bool { return strings.HasPrefix(name, "write_") }
	tests := []struct {
		name   string
		in     string
		out    string // "" when ok is false
		hidden []string
		ok     bool
		why    string
	}{
		{
			name: "hides",
			in: `{"id": 1, "jsonrpc":"2.0","result":{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},` +
				` {"name":"write_file","description":"w"}, {"x":1},{"name":"write_db"}],"nextCursor":"n"}}`,
			out:    `{"id": 1, "jsonrpc":"2.0","result":{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},{"x":1}],"nextCursor":"n"}}`,
			hidden: []string{"write_file", "write_db"},
			ok:     true,
			why:    "every other byte stays, kept tools included; a tool without a name is kept",
		},
		{
			name: "nothing hidden",
			in:   `{"jsonrpc":"2.0","id":1,"result":{"tools":[ {"name":"read_file"} ]}}`,
			out:  `{"jsonrpc":"2.0","id":1,"result":{"tools":[ {"name":"read_file"} ]}}`,
			ok:   true,
			why:  "a list with nothing to hide is passed on as it came",
		},
		{
			name:   "batch",
			in:     `[{"jsonrpc":"2.0","id":1,"result":{}}, {"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"write_x"}]}} ]`,
			out:    `[{"jsonrpc":"2.0","id":1,"result":{}}, {"jsonrpc":"2.0","id":2,"result":{"tools":[]}} ]`,
			hidden: []string{"write_x"},
			ok:     true,
			why:    "a batch holding a tools/list result is filtered in place",
		},
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"tools":[]}}`, why: "only a result lists tools"},
		{name: "no jsonrpc", in: `{"result":{"tools":[{"name":"write_x"}]}}`, why: "not JSON-RPC 2.0"},
		{name: "key case", in: `{"jsonrpc":"2.0","id":1,"Result":{"tools":[{"name":"write_x"}]}}`, why: "keys match exactly, unlike encoding/json's struct fields"},
		{name: "tools not an array", in: `{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"write_x"}}}`, why: "a tools/list result has an array"},
		{name: "invalid", in: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}`, why: "cut JSON is not a message"},
		{name: "trailing", in: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}} {}`, why: "one message, not two"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, hidden, ok := FilterTools([]byte(tt.in), hide)
			if ok != tt.ok || string(out) != tt.out || !reflect.DeepEqual(hidden, tt.hidden) {
				t.Fatalf("%s, %q, %v; want %s, %q, %v (%s)", out, hidden, ok, tt.out, tt.hidden, tt.ok, tt.why)
			}
			if ok && !json.Valid(out) {
				t.Fatalf("invalid JSON out: %s", out)
			}
			if !ok && out != nil {
				t.Fatal("out not nil when not ok")
			}
		})
	}
}

func TestErrorResponse(t *testing.T) {
	tests := []struct {
		id   string
		want string
		why  string
	}{
		{"7", `{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"capsem: \"rm\" denied\n"}}`, "a number id as it was"},
		{`"a\"b"`, `{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32000,"message":"capsem: \"rm\" denied\n"}}`, "a string id with its quotes"},
		{"", `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"capsem: \"rm\" denied\n"}}`, "no id: null"},
		{`"cut`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"capsem: \"rm\" denied\n"}}`, "an id that is not JSON would break the response: null"},
	}
	for _, tt := range tests {
		got := ErrorResponse(tt.id, -32000, "capsem: \"rm\" denied\n")
		if string(got) != tt.want || !json.Valid(got) {
			t.Errorf("%q: %s (%s)", tt.id, got, tt.why)
		}
	}
	// The id a Body reads answers the same request.
	var m Message
	b := NewBody(0, func(x Message) { m = x })
	b.Write([]byte(`{"jsonrpc":"2.0","id":"\u00e9\t<x>","method":"tools/call","params":{"name":"rm"}}`))
	var resp struct{ ID string }
	if err := json.Unmarshal(ErrorResponse(m.ID, 1, "x"), &resp); err != nil || resp.ID != "é\t<x>" {
		t.Fatalf("id %q answered as %q (%v)", m.ID, resp.ID, err)
	}
}
