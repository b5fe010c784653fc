package mcpscan

import (
	"reflect"
	"strings"
	"testing"
)

func TestStream(t *testing.T) {
	tests := []struct {
		name    string
		stream  string
		want    []Message
		eps     []string
		jsonrpc bool
		why     string
	}{
		{
			name: "response stream with two events",
			stream: "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
				": keep-alive\n\n" +
				"data: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\r\n\r\n",
			want: []Message{
				{Kind: Notification, Method: "notifications/progress", Preview: `{"progress":1}`, Bytes: 75},
				{Kind: Response, ID: "7", Preview: `{"content":[{"type":"text","text":"hi"}]}`, Bytes: 76},
			},
			jsonrpc: true,
			why:     "a POST answered with an event stream: progress, then the response, whose data spans two data lines",
		},
		{
			name:    "endpoint event",
			stream:  "event: endpoint\ndata: /messages?session_id=abc \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n\n",
			eps:     []string{"/messages?session_id=abc"},
			want:    []Message{{Kind: Response, ID: "0", Preview: "{}", Bytes: 36}},
			jsonrpc: true,
			why:     "the older HTTP+SSE transport names the URI the client POSTs to in an endpoint event",
		},
		{
			name:   "batch in one event, then garbage, then a message",
			stream: "data: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}]\n\ndata: {nope\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":3}\n\n",
			want: []Message{
				{Kind: Response, ID: "1", Preview: "{}", Bytes: 36},
				{Kind: Response, ID: "2", Preview: "{}", Bytes: 36},
				{Kind: Request, ID: "3", Method: "ping", Bytes: 40},
			},
			jsonrpc: true,
			why:     "each event is its own document: a broken one does not stop the stream",
		},
		{
			name:   "openai stream",
			stream: "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
			why:    "a model's event stream is not MCP",
		},
		{
			name:    "unterminated event",
			stream:  "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
			jsonrpc: false,
			why:     "an event without its blank line is dropped at Close, as the standard says",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 3, 16} {
				got, eps, jsonrpc := readStream(tt.stream, 0, n)
				if !reflect.DeepEqual(got, tt.want) || !reflect.DeepEqual(eps, tt.eps) || jsonrpc != tt.jsonrpc {
					t.Fatalf("pieces of %d (%s):\ngot  %+v %q %v\nwant %+v %q %v", n, tt.why, got, eps, jsonrpc, tt.want, tt.eps, tt.jsonrpc)
				}
			}
		})
	}
}

func TestStreamEventCap(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("x", MaxEventBytes) + `"}}`
	got, _, _ := readStream("data: "+big+"\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n", 0, 1<<20)
	if len(got) != 1 || got[0].ID != "2" {
		t.Fatalf("%+v: an event over MaxEventBytes is cut JSON and must yield nothing, and the next event must still be read", got)
	}
}
