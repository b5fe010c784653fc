package mcpgate

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/capsem/capsem/mcpgate/testserver"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testServerEnv makes the test binary, re-executed, run testserver on its
// stdin and stdout instead of the tests.
const testServerEnv = "MCPGATE_TESTSERVER"

func TestMain(m *testing.M) {
	if os.Getenv(testServerEnv) == "1" {
		if err := testserver.Run(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stdioServer is the test binary as a stdio server named name.
func stdioServer(name string, env map[string]string) Server {
	e := map[string]string{testServerEnv: "1"}
	for k, v := range env {
		e[k] = v
	}
	return Server{Name: name, Command: []string{os.Args[0]}, Env: e}
}

// decider denies the tools in deny, with rule "rule:<tool>".
type decider struct {
	deny map[string]bool
	hide bool
}

func (d decider) DecideMCPTool(server, tool string) policy.Decision {
	if d.deny[tool] {
		return policy.Decision{Rule: "rule:" + tool, Reason: policy.ReasonMCPToolDenied}
	}
	return policy.Decision{Allowed: true, Reason: "allowed"}
}

func (d decider) MCPHideDenied() bool { return d.hide }

func (d decider) MCPAskTimeout() time.Duration { return policy.DefaultAskTimeout }

type recorder struct {
	mu sync.Mutex
	ev []store.Event
}

func (r *recorder) Append(e store.Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

// calls returns the recorded MCP calls of method.
func (r *recorder) calls(method string) []*store.MCPCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*store.MCPCall
	for _, e := range r.ev {
		if e.Kind == store.KindMCPCall && e.MCPCall != nil && e.MCPCall.Method == method {
			out = append(out, e.MCPCall)
		}
	}
	return out
}

type harness struct {
	g   *Gateway
	rec *recorder
	url string
}

func newHarness(t testing.TB, d Decider, cfg Config, servers ...Server) *harness {
	t.Helper()
	rec := &recorder{}
	cfg.Recorder = rec
	g := New(cfg)
	g.Apply(servers)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.Serve(w, r, d) }))
	t.Cleanup(func() {
		ts.Close()
		g.Close()
	})
	return &harness{g: g, rec: rec, url: ts.URL}
}

// connect is a guest's SDK client session with server name.
func (h *harness) connect(t testing.TB, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "guest", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url + "/" + name}, nil)
	if err != nil {
		t.Fatalf("connecting to %s through the gateway: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks, want 1", tool, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T, want text", tool, res.Content[0])
	}
	return tc.Text, nil
}

// pidOf is the pid of server name's running process, 0 if none.
func (h *harness) pidOf(name string) int {
	e, _, _ := h.g.lookup(name)
	if e == nil {
		return 0
	}
	b := e.backend()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return 0
	}
	return b.proc.pid()
}
