package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capsem/capsem/mcpgate/testserver"
	mcpinspect "github.com/capsem/capsem/mitm/inspect/mcp"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// The MITM's view of MCP, in process: the official Go SDK's client and
// server on either side of the proxy, over each HTTP transport MCP has.
// The namespace tests (tests/mcp_test.go) do the same with the TypeScript
// SDK and a real guest network.

const mcpTestPolicy = `
[network]
default = "deny"
allow = ["api.test:443"]

[[mcp.rules]]
server = "api.test"
tools = ["env", "cra*"]
action = "deny"
`

// startMCPProxy is startTestProxy under mcpTestPolicy.
func startMCPProxy(t *testing.T, rec *memRecorder, h http.Handler) *testProxy {
	t.Helper()
	tp := startTestProxy(t, rec, h)
	pol, err := policy.Parse("mcp.toml", []byte(mcpTestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	tp.pol.Store(pol)
	return tp
}

func (m *memRecorder) mcpCalls() []store.MCPCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.MCPCall
	for _, ev := range m.evs {
		if ev.MCPCall != nil {
			out = append(out, *ev.MCPCall)
		}
	}
	return out
}

// mcpUpstream serves testserver's tools at /mcp (streamable HTTP) and /sse
// (the older HTTP+SSE transport); reached counts the tools/calls that got
// to it.
func mcpUpstream(jsonResponse bool, reached *atomic.Int64) http.Handler {
	srv := testserver.New()
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				reached.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse, DisableLocalhostProtection: true}))
	mux.Handle("/sse", mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.SSEOptions{DisableLocalhostProtection: true}))
	return mux
}

// guestClient is an HTTP client whose every connection is a guest flow
// through the proxy.
func (tp *testProxy) guestClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialTLSContext: func(context.Context, string, string) (net.Conn, error) {
			return tp.guestFlow()
		},
	}}
}

// guestFlow is dial for the HTTP client's goroutines: it returns its
// failure instead of ending the test.
func (tp *testProxy) guestFlow() (net.Conn, error) {
	client, guest := net.Pipe()
	up, err := net.Dial("tcp", tp.upstream)
	if err != nil {
		return nil, err
	}
	f := tp.flow()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan netstack.FlowResult, 1)
	go func() {
		res := tp.p.HandleFlow(ctx, guest, up, f)
		guest.Close()
		done <- res
	}()
	tp.t.Cleanup(func() { cancel(); <-done })
	tc := tls.Client(client, &tls.Config{ServerName: "api.test", RootCAs: tp.guestCA, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return nil, fmt.Errorf("guest TLS handshake: %w", err)
	}
	return tc, nil
}

func TestMCPThroughTheMITM(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport func(hc *http.Client) mcp.Transport
		json      bool
		server    string
		why       string
	}{
		{"streamable-sse", func(hc *http.Client) mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: "https://api.test/mcp", HTTPClient: hc}
		}, false, "api.test/mcp", "a POST answered with an event stream"},
		{"streamable-json", func(hc *http.Client) mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: "https://api.test/mcp", HTTPClient: hc}
		}, true, "api.test/mcp", "a POST answered with a JSON body"},
		{"http+sse", func(hc *http.Client) mcp.Transport {
			return &mcp.SSEClientTransport{Endpoint: "https://api.test/sse", HTTPClient: hc}
		}, false, "api.test/sse", "the older transport: POSTs get 202, responses and refusals come on the GET stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &memRecorder{}
			var reached atomic.Int64
			tp := startMCPProxy(t, rec, mcpUpstream(tc.json, &reached))

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cl := mcp.NewClient(&mcp.Implementation{Name: "guest", Version: "1"}, nil)
			cs, err := cl.Connect(ctx, tc.transport(tp.guestClient()), nil)
			if err != nil {
				t.Fatalf("%s: connect: %v", tc.why, err)
			}
			defer cs.Close()

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if strings.Contains(","+strings.Join(names, ",")+",", ",env,") || !strings.Contains(strings.Join(names, ","), "echo") {
				t.Errorf("%s: tools/list = %v: want echo, and env hidden (hide_denied)", tc.why, names)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "through the mitm"}})
			if err != nil || res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "through the mitm" {
				t.Fatalf("%s: echo = %+v, %v", tc.why, res, err)
			}
			before := reached.Load()
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "env", Arguments: map[string]any{"name": "HOME"}})
			if err == nil || !strings.Contains(err.Error(), "capsem: tools/call of tool \"env\" refused by mcp.rules[1] (line 6)") {
				t.Fatalf("%s: the denied env call: %v, want capsem's refusal naming mcp.rules[1] (line 6)", tc.why, err)
			}
			if reached.Load() != before {
				t.Errorf("%s: the denied call reached the upstream", tc.why)
			}
			cs.Close()

			// The calls are recorded once each, the response matched.
			deadline := time.Now().Add(5 * time.Second)
			var calls []store.MCPCall
			for time.Now().Before(deadline) {
				calls = rec.mcpCalls()
				if byMethod(calls, "tools/call", "echo") != nil && byMethod(calls, "tools/call", "env") != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			echo := byMethod(calls, "tools/call", "echo")
			if echo == nil || echo.ServerName != tc.server || echo.Decision != store.Allowed ||
				!strings.Contains(echo.ResponsePreview, "through the mitm") || echo.RequestID == "" || echo.BytesReceived == 0 {
				t.Errorf("%s: echo's mcp_call = %+v", tc.why, echo)
			}
			env := byMethod(calls, "tools/call", "env")
			if env == nil || env.Decision != store.Denied || env.Reason != policy.ReasonMCPToolDenied ||
				!strings.HasPrefix(env.MatchedRule, "mcp.rules[1] (line 6)") || !strings.HasPrefix(env.ErrorMessage, "capsem:") {
				t.Errorf("%s: env's mcp_call = %+v", tc.why, env)
			}
			if byMethod(calls, "initialize", "") == nil || byMethod(calls, "tools/list", "") == nil {
				t.Errorf("%s: initialize or tools/list not recorded: %+v", tc.why, calls)
			}
			n := 0
			for _, c := range calls {
				if c.Method == "tools/call" && c.ToolName == "echo" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s: echo recorded %d times", tc.why, n)
			}
		})
	}
}

func byMethod(calls []store.MCPCall, method, tool string) *store.MCPCall {
	for i := range calls {
		if calls[i].Method == method && (tool == "" || calls[i].ToolName == tool) {
			return &calls[i]
		}
	}
	return nil
}

// rawMCPPost posts body to path through the proxy and returns the
// response's status and body.
func rawMCPPost(t *testing.T, tp *testProxy, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "https://api.test"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := tp.guestClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMCPHeldRequests(t *testing.T) {
	rec := &memRecorder{}
	var reached atomic.Int64
	var other atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpUpstream(true, &reached))
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		other.Store(n)
		io.WriteString(w, `{"ok":true}`)
	})
	tp := startMCPProxy(t, rec, mux)

	for _, tc := range []struct {
		name, path, body string
		wantStatus       int
		want             []string // in the response body
		why              string
	}{
		{"batch", "/mcp",
			`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}},` +
				`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"env","arguments":{"name":"HOME"}}},` +
				`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`,
			http.StatusOK, []string{`[{"jsonrpc":"2.0","id":1,"error":{"code":-32050`, `sent in one batch with env`, `"id":"b"`, `capsem: tools/call of tool \"env\" refused by mcp.rules[1] (line 6)`},
			"a batch holding a denied call is refused whole, each request answered, in a batch"},
		{"single", "/mcp",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"name":"HOME"},"name":"crash"}}`,
			http.StatusOK, []string{`{"jsonrpc":"2.0","id":7,"error":{"code":-32050,"message":"capsem: tools/call of tool \"crash\"`},
			"params' members in any order; a glob rule (cra*)"},
		{"large JSON", "/other",
			`{"data":"` + strings.Repeat("a", mcpinspect.MaxHold+10) + `","jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"env"}}`,
			http.StatusRequestEntityTooLarge, []string{"capsem blocked this request"},
			"JSON too large to read whole could hold a call past its first 4 MiB: refused, however its start looks"},
		{"large other body", "/other",
			strings.Repeat("a", mcpinspect.MaxHold+10),
			http.StatusOK, []string{`{"ok":true}`},
			"a body that is not JSON goes on whole, however large, to a host with deny rules"},
		{"large MCP", "/mcp",
			`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("a", mcpinspect.MaxHold+10) + `"}}}`,
			http.StatusRequestEntityTooLarge, []string{"capsem blocked this request", "Send smaller requests"},
			"an MCP request too large to decide is refused, not forwarded undecided"},
	} {
		status, body := rawMCPPost(t, tp, tc.path, tc.body)
		if status != tc.wantStatus {
			t.Errorf("%s (%s): status %d, want %d; body %.300s", tc.name, tc.why, status, tc.wantStatus, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s (%s): body %.400s, want it to hold %s", tc.name, tc.why, body, w)
			}
		}
	}
	if reached.Load() != 0 {
		t.Errorf("%d tools/calls reached the upstream; every one sent was refused", reached.Load())
	}
	if other.Load() != int64(mcpinspect.MaxHold+10) {
		t.Errorf("the other body reached the upstream with %d bytes", other.Load())
	}
	calls := rec.mcpCalls()
	if c := byMethod(calls, "notifications/progress", ""); c == nil || c.Decision != store.Denied {
		t.Errorf("the notification of the refused batch: %+v, want recorded, denied", c)
	}
	if c := byMethod(calls, "tools/call", "echo"); c == nil || c.Decision != store.Denied || c.Reason != policy.ReasonMCPToolDenied {
		t.Errorf("the allowed call of the refused batch: %+v, want denied with it", c)
	}
}

func TestMCPAmbiguousRequestsRefused(t *testing.T) {
	rec := &memRecorder{}
	var reached atomic.Int64
	tp := startMCPProxy(t, rec, mcpUpstream(true, &reached))
	for _, tc := range []struct {
		body       string
		wantStatus int
		want       string
		why        string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"env","name":"echo"}}`, http.StatusOK, `"error":{"code":-32050`,
			"a first-wins server would run env; capsem read echo"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"env"},"method":"ping"}`, http.StatusOK, `"error":{"code":-32050`,
			"a first-wins server would call the tool; capsem read a ping"},
		{`{"jsonrpc":"2.0","jsonrpc":"x","id":3,"method":"tools/call","params":{"name":"env"}}`, http.StatusOK, `"error":{"code":-32050`,
			"a second version does not hide the message"},
		{`{"id":4,"method":"tools/call","params":{"name":"env"}}`, http.StatusBadRequest, `not JSON-RPC 2.0`,
			"no version: a lenient server may still run it"},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"Name":"env"}}`, http.StatusOK, `"error":{"code":-32050`,
			"encoding/json reads Name as name"},
		{`{"jsonrpc":"2.0","id":7,"Method":"tools/call","params":{"name":"env"}}`, http.StatusBadRequest, `not JSON-RPC 2.0`,
			"encoding/json reads Method as method: no message capsem could decide"},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"env","_meta":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}}`,
			http.StatusBadRequest, `could not read as JSON to its end`, "nesting past the scanner's limit: the Go SDK still runs it"},
		{"\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"env"}}`, http.StatusBadRequest, `could not read as JSON to its end`,
			"a byte-order mark: Python's json.loads reads past it"},
		{")]}'\n" + `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"env"}}`, http.StatusBadRequest, `could not read as JSON to its end`,
			"an anti-hijacking prefix: lenient parsers skip it"},
		{`/* */{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"env"}}`, http.StatusBadRequest, `could not read as JSON to its end`,
			"a comment first: JSON5 and Jackson with comments allowed read past it"},
	} {
		status, body := rawMCPPost(t, tp, "/mcp", tc.body)
		if status != tc.wantStatus || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %.300s, want %d with %s", tc.why, status, body, tc.wantStatus, tc.want)
		}
	}
	// A Content-Type that is not JSON hides nothing from a host with deny
	// rules: a lenient server may read the body as JSON all the same.
	req, _ := http.NewRequest(http.MethodPost, "https://api.test/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"env"}}`))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := tp.guestClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"error":{"code":-32050`) {
		t.Errorf("a text/plain body holding a denied call: %d %.300s, want capsem's refusal", resp.StatusCode, b)
	}
	// A GET with a body is read like a POST: a method-agnostic server runs
	// it.
	req, _ = http.NewRequest(http.MethodGet, "https://api.test/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"env"}}`))
	req.Header.Set("Accept", "text/event-stream")
	resp, err = tp.guestClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"error":{"code":-32050`) {
		t.Errorf("a GET whose body holds a denied call: %d %.300s, want capsem's refusal", resp.StatusCode, b)
	}

	// Nor does a coding: what capsem decodes might not be all the server
	// does — in any of the fields ("identity" first hides nothing).
	req, _ = http.NewRequest(http.MethodPost, "https://api.test/mcp", strings.NewReader("\x1f\x8b not really gzip"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Content-Encoding", "identity")
	req.Header.Add("Content-Encoding", "gzip")
	resp, err = tp.guestClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(b), "uncompressed") {
		t.Errorf("a gzip body to a host with deny rules: %d %.300s, want 415 saying to send it uncompressed", resp.StatusCode, b)
	}
	if reached.Load() != 0 {
		t.Errorf("%d ambiguous or disguised calls reached the upstream", reached.Load())
	}
}

func TestMCPWebSocketRefusedToAHostWithDenyRules(t *testing.T) {
	rec := &memRecorder{}
	var reached atomic.Int64
	tp := startMCPProxy(t, rec, mcpUpstream(true, &reached))
	c, err := tp.guestFlow()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	// MCP's TypeScript SDK still ships a WebSocket client transport: its
	// frames would carry tools/calls capsem does not read.
	resp, body := roundTrip(t, c, br, "GET /mcp HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Capsem-Blocked") != ReasonMCPToolDenied || !strings.Contains(body, "WebSocket") {
		t.Errorf("a WebSocket upgrade to a host with MCP deny rules: %d %q %.200s, want 403 %s", resp.StatusCode, resp.Header.Get("X-Capsem-Blocked"), body, ReasonMCPToolDenied)
	}
}

// TestMCPHTTPSSEWithoutRules: on a host without [[mcp.rules]] (no stream
// is rewritten) the older transport's POSTs keep joining the GET stream's
// session, so every response there is matched to its call — the endpoint
// session was forgotten after the first POST, and each later call recorded
// "no response seen".
func TestMCPHTTPSSEWithoutRules(t *testing.T) {
	rec := &memRecorder{}
	var reached atomic.Int64
	tp := startTestProxy(t, rec, mcpUpstream(false, &reached))
	pol, err := policy.Parse("mcp.toml", []byte("[network]\ndefault = \"deny\"\nallow = [\"api.test:443\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tp.pol.Store(pol)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := mcp.NewClient(&mcp.Implementation{Name: "guest", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.SSEClientTransport{Endpoint: "https://api.test/sse", HTTPClient: tp.guestClient()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	for i := 0; i < n; i++ {
		text := fmt.Sprintf("call %d", i)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != text {
			t.Fatalf("echo %d = %+v, %v", i, res, err)
		}
	}
	cs.Close()
	var echoes []store.MCPCall
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		echoes = echoes[:0]
		for _, c := range rec.mcpCalls() {
			if c.Method == "tools/call" && c.ToolName == "echo" {
				echoes = append(echoes, c)
			}
		}
		if len(echoes) == n {
			break
		}
	}
	if len(echoes) != n {
		t.Fatalf("%d echo calls recorded, want %d: %+v", len(echoes), n, echoes)
	}
	for i, c := range echoes {
		if c.ErrorMessage != "" || !strings.Contains(c.ResponsePreview, "call ") {
			t.Errorf("echo %d's record: error %q, response %q: want its response matched", i, c.ErrorMessage, c.ResponsePreview)
		}
	}
}
