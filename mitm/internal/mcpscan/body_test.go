package mcpscan

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// feed writes b to w in pieces of n bytes (all at once when n <= 0).
func feed(w io.Writer, b []byte, n int) {
	if n <= 0 {
		n = len(b) + 1
	}
	for len(b) > 0 {
		k := min(n, len(b))
		if m, err := w.Write(b[:k]); m != k || err != nil {
			panic(fmt.Sprintf("Write = %d, %v", m, err))
		}
		b = b[k:]
	}
}

// readBody returns the messages of body fed in pieces of n, and JSONRPC.
func readBody(body string, preview, n int) ([]Message, bool) {
	var got []Message
	b := NewBody(preview, func(m Message) { got = append(got, m) })
	feed(b, []byte(body), n)
	b.Close()
	return got, b.JSONRPC()
}

// readStream returns the messages and endpoints of an event stream fed in
// pieces of n, and JSONRPC.
func readStream(stream string, preview, n int) ([]Message, []string, bool) {
	var got []Message
	var eps []string
	s := NewStream(preview, func(m Message) { got = append(got, m) }, func(u string) { eps = append(eps, u) })
	feed(s, []byte(stream), n)
	s.Close()
	return got, eps, s.JSONRPC()
}

const toolsCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"x y"}}}`

var bigArg = strings.Repeat("a", 10000)

func TestBody(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		preview int
		want    []Message
		jsonrpc bool
		why     string
	}{
		{
			name: "request",
			body: toolsCall,
			want: []Message{{Kind: Request, ID: "7", Method: "tools/call", Tool: "search",
				Preview: `{"name":"search","arguments":{"q":"x y"}}`, Bytes: int64(len(toolsCall))}},
			jsonrpc: true,
			why:     "a tools/call is the call policy decides on: its tool and arguments must be read",
		},
		{
			name: "string id and method after params",
			body: ` {"params":{"uri":"file:///etc/passwd","name":"x"},"id":"r-\"1\"","method":"resources/read","jsonrpc":"2.0"} `,
			want: []Message{{Kind: Request, ID: `"r-\"1\""`, Method: "resources/read", Tool: "file:///etc/passwd",
				Preview: `{"uri":"file:///etc/passwd","name":"x"}`, Bytes: 107}},
			jsonrpc: true,
			why:     "members come in any order; the id keeps its quotes so a response matches it; resources name a uri",
		},
		{
			name: "batch with a notification",
			body: `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},
			        {"jsonrpc":"2.0","method":"notifications/initialized"},
			        {"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"review"}}]`,
			want: []Message{
				{Kind: Request, ID: "1", Method: "tools/list", Bytes: 46},
				{Kind: Notification, Method: "notifications/initialized", Bytes: 54},
				{Kind: Request, ID: "2", Method: "prompts/get", Tool: "review", Preview: `{"name":"review"}`, Bytes: 74},
			},
			jsonrpc: true,
			why:     "a batch is several messages, each one handed out; a notification has no id",
		},
		{
			name: "tools/list response",
			body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_file","inputSchema":{}},{"description":"no name"},{"name":"search"}],"nextCursor":"c"}}`,
			want: []Message{{Kind: Response, ID: "1",
				Preview:   `{"tools":[{"name":"read_file","inputSchema":{}},{"description":"no name"},{"name":"search"}],"nextCursor":"c"}`,
				Bytes:     144,
				ToolNames: []string{"read_file", "search"}}},
			jsonrpc: true,
			why:     "the tool names of a tools/list result are what hide_denied works on",
		},
		{
			name: "error response",
			body: `{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"Method not found","data":{"m":"x"}}}`,
			want: []Message{{Kind: Error, ID: `"a"`, ErrorCode: -32601, ErrorMessage: "Method not found",
				Preview: `{"code":-32601,"message":"Method not found","data":{"m":"x"}}`, Bytes: 96}},
			jsonrpc: true,
			why:     "an error response is recorded with its code and message",
		},
		{
			name: "null id, scalar result",
			body: `[{"jsonrpc":"2.0","id":null,"error":{"code":-32700.0,"message":"Parse error"}},{"jsonrpc":"2.0","id":3,"result":"ok"}]`,
			want: []Message{
				{Kind: Error, ID: "null", ErrorCode: -32700, ErrorMessage: "Parse error", Preview: `{"code":-32700.0,"message":"Parse error"}`, Bytes: 77},
				{Kind: Response, ID: "3", Preview: `"ok"`, Bytes: 38},
			},
			jsonrpc: true,
			why:     "an error to an unreadable request has a null id; a result need not be an object",
		},
		{
			name:    "huge params",
			body:    `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"w","arguments":{"data":"` + bigArg + `"}}}`,
			preview: 32,
			want: []Message{{Kind: Request, ID: "9", Method: "tools/call", Tool: "w",
				Preview: `{"name":"w","arguments":{"data":`, PreviewTruncated: true, Bytes: int64(92 + len(bigArg))}},
			jsonrpc: true,
			why:     "a preview is capped, whatever the size of the params, and Bytes still counts the whole message",
		},
		{
			name:    "openai request",
			body:    `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"method":"x","stream":true}`,
			jsonrpc: false,
			why:     "JSON that is not JSON-RPC 2.0 is not MCP: no messages",
		},
		{
			name:    "openai error",
			body:    `{"error":{"message":"bad key","type":"invalid_request_error","code":401}}`,
			jsonrpc: false,
			why:     "an error object without jsonrpc 2.0 is not a JSON-RPC error",
		},
		{
			name:    "json-rpc 1.0",
			body:    `{"jsonrpc":"1.0","id":1,"method":"tools/call"}`,
			jsonrpc: false,
			why:     "only JSON-RPC 2.0 is MCP",
		},
		{
			name:    "jsonrpc without a method, result or error",
			body:    `{"jsonrpc":"2.0","id":1}`,
			jsonrpc: false,
			why:     "a message must be a request, notification or response",
		},
		{
			name:    "garbage",
			body:    "\x00{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
			jsonrpc: false,
			why:     "bytes that are not JSON stop the parse: nothing after them is read",
		},
		{
			name:    "cut",
			body:    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"`,
			jsonrpc: true,
			why:     "a message that does not end is not handed out, though the body did look like JSON-RPC",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 7} {
				got, jsonrpc := readBody(tt.body, tt.preview, n)
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("pieces of %d (%s):\ngot  %+v\nwant %+v", n, tt.why, got, tt.want)
				}
				if jsonrpc != tt.jsonrpc {
					t.Fatalf("pieces of %d: JSONRPC() = %v (%s)", n, jsonrpc, tt.why)
				}
			}
		})
	}
}

func TestBodyCaps(t *testing.T) {
	var tools []string
	for i := range MaxToolNames + 5 {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d"}`, i))
	}
	long := strings.Repeat("é", 1000)
	body := `{"jsonrpc":"2.0","id":"` + long + `","error":{"code":1,"message":"` + long + `"},"result":{"tools":[` + strings.Join(tools, ",") + `]}}`
	got, _ := readBody(body, 100, 0)
	if len(got) != 1 {
		t.Fatalf("%d messages", len(got))
	}
	m := got[0]
	if len(m.ID) > MaxIDBytes || !strings.HasPrefix(m.ID, `"éé`) || !strings.HasSuffix(m.ID, `é"`) {
		t.Errorf("id %d bytes: %.20s…", len(m.ID), m.ID)
	}
	if len(m.ErrorMessage) > 100 || len(m.Preview) > 100 || !m.PreviewTruncated {
		t.Errorf("error message %d bytes, preview %d bytes (truncated %v)", len(m.ErrorMessage), len(m.Preview), m.PreviewTruncated)
	}
	// An error response's tools are not a tools/list result.
	if m.Kind != Error || m.ToolNames != nil {
		t.Errorf("kind %v, %d tool names", m.Kind, len(m.ToolNames))
	}

	body = `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Join(tools, ",") + `,{"name":"` + strings.Repeat("n", 5000) + `"}]}}`
	got, _ = readBody(body, 0, 0)
	if len(got) != 1 || len(got[0].ToolNames) != MaxToolNames || !got[0].ToolsTruncated {
		t.Fatalf("%d messages, %d tool names", len(got), len(got[0].ToolNames))
	}
	if len(got[0].Preview) > DefaultPreviewBytes {
		t.Errorf("preview %d bytes", len(got[0].Preview))
	}
	body = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"` + strings.Repeat("n", 5000) + `"}]}}`
	got, _ = readBody(body, 0, 0)
	if len(got) != 1 || len(got[0].ToolNames) != 1 || len(got[0].ToolNames[0]) != MaxToolBytes {
		t.Fatalf("%+v", got)
	}
}

func TestBodyJSONRPCEarly(t *testing.T) {
	b := NewBody(0, nil)
	b.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"q":`))
	if !b.JSONRPC() {
		t.Fatal("JSONRPC() false before the message ended: a caller deciding on a body's start cannot tell MCP")
	}
	b.Close()
	n := 0
	b = NewBody(0, func(Message) { n++ })
	b.Close()
	b.Write([]byte(toolsCall))
	if n != 0 {
		t.Fatal("a message read after Close")
	}
}

func TestKnownMethod(t *testing.T) {
	for _, tt := range []struct {
		method string
		want   bool
		why    string
	}{
		{"tools/call", true, "the call policy decides on"},
		{"elicitation/create", true, "a server's request to the client"},
		{"notifications/tools/list_changed", true, "every notification is MCP's"},
		{"eth_call", false, "JSON-RPC that is not MCP"},
		{"", false, "no method"},
	} {
		if got := KnownMethod(tt.method); got != tt.want {
			t.Errorf("KnownMethod(%q) = %v (%s)", tt.method, got, tt.why)
		}
	}
}

func TestBodyAmbiguous(t *testing.T) {
	long := strings.Repeat("a", MaxToolBytes+1)
	for _, tc := range []struct {
		in        string
		ambiguous bool
		why       string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, false, "one of each member"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"env"}}`, true, "a first-wins server would run the first name, capsem decided the last"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping","params":{"name":"env"}}`, true, "a first-wins server would call the tool, capsem saw a ping"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"env"},"params":{"name":"echo"}}`, true, "two params"},
		{`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, true, "two ids: the response could not be matched"},
		{`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}`, true, "two versions: a first-wins server reads 2.0"},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","uri":"b"}}`, true, "two uris"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + long + `"}}`, true, "a name cut at the cap cannot be decided"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"name":"x","name":"y"},"name":"echo"}}`, false, "a duplicate inside the arguments decides nothing"},
	} {
		var got []Message
		b := NewBody(64, func(m Message) { got = append(got, m) })
		b.Write([]byte(tc.in))
		b.Close()
		if len(got) != 1 || got[0].Ambiguous != tc.ambiguous {
			t.Errorf("%s: %.80s: got %+v, want ambiguous=%v", tc.why, tc.in, got, tc.ambiguous)
		}
	}
}

func TestBodySuspect(t *testing.T) {
	for _, tc := range []struct {
		in      string
		suspect bool
		why     string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"env"}}`, false, "JSON-RPC 2.0"},
		{`{"id":1,"method":"tools/call","params":{"name":"env"}}`, true, "no version: a lenient server may still run it"},
		{`[{"jsonrpc":"1.0","id":1,"method":"tools/call"}]`, true, "another version, in a batch"},
		{`{"model":"x","messages":[{"method":"y"}]}`, false, "a method deeper than a message's members is no request"},
	} {
		b := NewBody(64, nil)
		b.Write([]byte(tc.in))
		b.Close()
		if b.Suspect() != tc.suspect {
			t.Errorf("%s: %s: Suspect() = %v", tc.why, tc.in, b.Suspect())
		}
	}
}

func TestBodyAmbiguousCase(t *testing.T) {
	for _, tc := range []struct {
		in        string
		ambiguous bool
		why       string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"env"}}`, true, "encoding/json reads Name as name"},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"env"}}`, true, "encoding/json reads Method as method"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"env"}}`, true, "a case variant is a second name"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"env"}}`, true, "Unicode folding: ſ folds to s"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"Name":"x"}}}`, false, "a member of the arguments decides nothing"},
	} {
		ambiguous := false
		b := NewBody(64, func(m Message) { ambiguous = ambiguous || m.Ambiguous })
		b.Write([]byte(tc.in))
		b.Close()
		// A message made ambiguous, or none made of an ambiguous object.
		if got := ambiguous || b.Suspect(); got != tc.ambiguous {
			t.Errorf("%s: %s: ambiguous or suspect = %v, want %v", tc.why, tc.in, got, tc.ambiguous)
		}
	}
}

func TestBodyWhole(t *testing.T) {
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	for _, tc := range []struct {
		in    string
		whole bool
		why   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, true, "a message read to its end"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, true, "a batch"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"env","_meta":` + deep + `}}`, false, "nesting past the scanner's limit: servers read it"},
		{"\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, false, "a byte-order mark: Python's json.loads(bytes) reads it"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":NaN}}`, false, "NaN: Python reads it"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, false, "cut before its end"},
	} {
		b := NewBody(64, nil)
		b.Write([]byte(tc.in))
		b.Close()
		if b.Whole() != tc.whole {
			t.Errorf("%s: Whole() = %v", tc.why, b.Whole())
		}
	}
}
