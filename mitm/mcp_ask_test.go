package mitm

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/policy"
)

// A remote MCP server's tool that no [[mcp.rules]] entry names, under
// [mcp] unknown = "ask", called with the official SDK's client through
// the MITM: the request's body is held while a person is asked; "once"
// lets the call reach the server, "deny" answers the guest with capsem's
// JSON-RPC refusal, and with nobody listening it is refused at once. The
// tools stay listed (a person may allow them), and each record names the
// answer and who gave it.
func TestMCPAskThroughTheMITM(t *testing.T) {
	rec := &memRecorder{}
	var reached atomic.Int64
	asks := ask.New(ask.Config{})
	tp := startTestProxyWith(t, rec, mcpUpstream(true, &reached), func(c *Config) { c.Asks = asks })
	pol, err := policy.Parse("ask.toml", []byte("[network]\nallow = [\"api.test\"]\n\n[mcp]\nunknown = \"ask\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	tp.pol.Store(pol)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "guest", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "https://api.test/mcp", HTTPClient: tp.guestClient()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 2 {
		t.Fatalf("tools/list: %v %v: the tools a person may allow are listed", tools, err)
	}
	echo := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "asked-echo"}})
	}
	if _, err := echo(); err == nil || !strings.Contains(err.Error(), ask.ReasonUnanswered) {
		t.Errorf("with nobody listening: %v", err)
	}

	l := asks.Listen()
	defer l.Close()
	go func() {
		for u := range l.Updates() {
			if u.Type != ask.UpdateAsked {
				continue
			}
			a := ask.Deny
			if u.Question.Tool == "echo" && u.Question.Name == "api.test" && u.Question.Kind == ask.KindMCP {
				a = ask.Once
			}
			_ = asks.Answer(u.Question.ID, ask.Answer{Answer: a, By: ask.ByAPI})
		}
	}()
	if res, err := echo(); err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "asked-echo" {
		t.Errorf("answered once: %+v %v", res, err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "env", Arguments: map[string]any{"name": "HOME"}}); err == nil || !strings.Contains(err.Error(), ask.ReasonDenied) {
		t.Errorf("answered deny: %v", err)
	}
	if n := reached.Load(); n != 1 {
		t.Errorf("%d tools/calls reached the server, want the one allowed", n)
	}
	want := []string{
		"denied ask-unanswered ",
		"allowed asked-allowed asked: server=api.test tools=echo (once, by api)",
		"denied asked-denied asked: server=api.test tools=env (deny, by api)",
	}
	var got []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = got[:0]
		for _, c := range rec.mcpCalls() {
			if c.Method == "tools/call" {
				got = append(got, string(c.Decision)+" "+c.Reason+" "+c.MatchedRule)
			}
		}
		if len(got) == len(want) {
			break
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("mcp_calls:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
