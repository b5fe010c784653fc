package mcpgate

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/mcpgate/testserver"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func TestListAndCallRecorded(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)

	if got := cs.InitializeResult().ServerInfo.Name; got != "capsem-testserver" {
		t.Errorf("serverInfo.name = %q, want the backend's capsem-testserver", got)
	}
	if got := cs.InitializeResult().Instructions; got != "capsem's test MCP server" {
		t.Errorf("instructions = %q, want the backend's", got)
	}
	if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || caps.Prompts == nil || caps.Resources == nil || caps.Completions == nil || caps.Logging != nil {
		t.Errorf("capabilities = %+v, want the backend's tools, prompts, resources, completions and no logging", caps)
	}
	want := []string{"add", "calls", "crash", "echo", "env", "slow"}
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	got, err := callText(t, cs, "echo", map[string]any{"text": "héllo"})
	if err != nil || got != "héllo" {
		t.Fatalf("echo = %q, %v; want héllo", got, err)
	}
	if got, err := callText(t, cs, "add", map[string]any{"a": 2, "b": 3.5}); err != nil || got != "5.5" {
		t.Errorf("add = %q, %v; want 5.5", got, err)
	}

	calls := h.rec.calls("tools/call")
	if len(calls) != 2 {
		t.Fatalf("%d tools/call events, want 2", len(calls))
	}
	c := calls[0]
	params := `{"name":"echo","arguments":{"text":"héllo"}}`
	if c.ServerName != "test" || c.ToolName != "echo" || c.Decision != store.Allowed || c.Reason != "allowed" ||
		c.RequestID == "" || c.RequestID == calls[1].RequestID || c.ErrorMessage != "" || c.Duration <= 0 {
		t.Errorf("event = %+v", c)
	}
	// bytes_sent is the whole message the guest posted (jsonrpc, id, method
	// and params), as the MITM counts it.
	if c.RequestPreview != params || c.BytesSent <= int64(len(params)) || c.BytesSent > int64(len(params))+64 {
		t.Errorf("request preview %q (%d bytes), want %s", c.RequestPreview, c.BytesSent, params)
	}
	if !strings.Contains(c.ResponsePreview, `"text":"héllo"`) || c.BytesReceived != int64(len(c.ResponsePreview)) {
		t.Errorf("response preview %q (%d bytes)", c.ResponsePreview, c.BytesReceived)
	}
	for _, m := range []string{"initialize", "notifications/initialized", "tools/list"} {
		if n := len(h.rec.calls(m)); n != 1 {
			t.Errorf("%d %s events, want 1", n, m)
		}
	}
}

func TestPreviewCapped(t *testing.T) {
	h := newHarness(t, decider{}, Config{PreviewBytes: 40}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	long := strings.Repeat("é", 100)
	if _, err := callText(t, cs, "echo", map[string]any{"text": long}); err != nil {
		t.Fatal(err)
	}
	c := h.rec.calls("tools/call")[0]
	if len(c.RequestPreview) > 40 || len(c.ResponsePreview) > 40 || !strings.HasPrefix(c.RequestPreview, `{"name":"echo"`) {
		t.Errorf("previews %q, %q: want at most 40 bytes each", c.RequestPreview, c.ResponsePreview)
	}
	if c.BytesSent < 200 || c.BytesReceived < 200 {
		t.Errorf("bytes %d/%d: want the whole sizes, not the previews'", c.BytesSent, c.BytesReceived)
	}
}

func TestDeniedToolNeverReachesServer(t *testing.T) {
	d := decider{deny: map[string]bool{"echo": true}}
	h := newHarness(t, d, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)

	_, err := callText(t, cs, "echo", map[string]any{"text": "x"})
	var w *jsonrpc.Error
	if !errors.As(err, &w) {
		t.Fatalf("echo: err %v, want a JSON-RPC error", err)
	}
	want := policy.MCPRefusal("tools/call", "echo", d.DecideMCPTool("test", "echo"))
	if w.Code != policy.MCPRefusalCode || w.Message != want {
		t.Errorf("error %d %q, want %d %q", w.Code, w.Message, policy.MCPRefusalCode, want)
	}
	if n, err := callText(t, cs, "calls", nil); err != nil || n != "0" {
		t.Errorf("calls the server served = %q, %v; want 0 (the refused echo never reached it)", n, err)
	}
	c := h.rec.calls("tools/call")[0]
	if c.Decision != store.Denied || c.Reason != policy.ReasonMCPToolDenied || c.MatchedRule != "rule:echo" || c.ErrorMessage != want || c.ToolName != "echo" {
		t.Errorf("event = %+v", c)
	}
}

func TestNoDeciderFailsClosed(t *testing.T) {
	h := newHarness(t, nil, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	if _, err := callText(t, cs, "echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), "capsem:") {
		t.Errorf("echo without a policy: err %v, want capsem's refusal", err)
	}
}

func TestHideDenied(t *testing.T) {
	for _, tc := range []struct {
		name string
		hide bool
		want []string
		why  string
	}{
		{"hidden", true, []string{"add", "calls", "echo", "slow"}, "hide_denied leaves denied tools out so agents do not try them"},
		{"shown", false, []string{"add", "calls", "crash", "echo", "env", "slow"}, "without hide_denied the guest sees every tool and is refused at the call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, decider{deny: map[string]bool{"env": true, "crash": true}, hide: tc.hide}, Config{}, stdioServer("test", nil))
			cs := h.connect(t, "test", nil)
			if got := toolNames(t, cs); !slices.Equal(got, tc.want) {
				t.Errorf("tools = %v, want %v (%s)", got, tc.want, tc.why)
			}
		})
	}
}

func TestEnvIsolation(t *testing.T) {
	t.Setenv("CAPSEM_TEST_SECRET", "do-not-leak")
	h := newHarness(t, decider{}, Config{}, stdioServer("test", map[string]string{"GIVEN": "yes"}))
	cs := h.connect(t, "test", nil)
	for _, tc := range []struct {
		name, want, why string
	}{
		{"PATH", os.Getenv("PATH"), "PATH is passed on, so the server can run its tools"},
		{"HOME", os.Getenv("HOME"), "HOME is passed on, for the server's config"},
		{"GIVEN", "yes", "the server's own env is given"},
		{"CAPSEM_TEST_SECRET", "", "nothing else of capsem's environment reaches the server"},
	} {
		if got, err := callText(t, cs, "env", map[string]any{"name": tc.name}); err != nil || got != tc.want {
			t.Errorf("env %s = %q, %v; want %q: %s", tc.name, got, err, tc.want, tc.why)
		}
	}
}

func TestCrashRestarts(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	pid := h.pidOf("test")
	if pid == 0 {
		t.Fatal("no server process after initialize")
	}
	if _, err := callText(t, cs, "crash", nil); err == nil {
		t.Fatal("crash: no error, want the call to fail as the server died")
	}
	if got, err := callText(t, cs, "echo", map[string]any{"text": "again"}); err != nil || got != "again" {
		t.Fatalf("echo after the crash = %q, %v; want the restarted server's answer", got, err)
	}
	if p := h.pidOf("test"); p == 0 || p == pid {
		t.Errorf("pid after restart %d, before %d: want a new process", p, pid)
	}
	ev := h.rec.calls(MethodServerRestarted)
	if len(ev) != 1 {
		t.Fatalf("%d %s events, want 1", len(ev), MethodServerRestarted)
	}
	if e := ev[0]; e.ServerName != "test" || e.Decision != store.Allowed || !strings.Contains(e.ErrorMessage, "exit status 3") || !strings.Contains(e.ErrorMessage, "crash tool called") {
		t.Errorf("restart event = %+v, want exit status 3 and the stderr tail", e)
	}
	crash := h.rec.calls("tools/call")[0]
	if crash.ToolName != "crash" || crash.ErrorMessage == "" {
		t.Errorf("crash call event = %+v, want an error message", crash)
	}
}

func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestApplyStopsServers(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("test", map[string]string{"GIVEN": "one"}), stdioServer("other", nil))
	cs := h.connect(t, "test", nil)
	h.connect(t, "other", nil)
	pid, other := h.pidOf("test"), h.pidOf("other")

	// Changed config: the process is stopped, the guest session stays, the
	// next call runs the new config.
	h.g.Apply([]Server{stdioServer("test", map[string]string{"GIVEN": "two"}), stdioServer("other", nil)})
	if !gone(pid) {
		t.Errorf("pid %d still exists after Apply changed its server", pid)
	}
	if got, err := callText(t, cs, "env", map[string]any{"name": "GIVEN"}); err != nil || got != "two" {
		t.Errorf("env GIVEN after the change = %q, %v; want two", got, err)
	}
	if h.pidOf("other") != other {
		t.Error("Apply restarted a server whose config did not change")
	}

	pid = h.pidOf("test")
	h.g.Apply([]Server{stdioServer("other", nil)})
	if !gone(pid) {
		t.Errorf("pid %d still exists after Apply removed its server", pid)
	}
	resp, err := http.Post(h.url+"/test", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("removed server: status %d, want 404", resp.StatusCode)
	}

	h.g.Close()
	if !gone(other) {
		t.Errorf("pid %d still exists after Close", other)
	}
}

func TestUnknownServer(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("alpha", nil), stdioServer("beta", nil))
	for _, tc := range []struct {
		path, want, why string
	}{
		{"/nope", `"nope"`, "an unknown name is named back"},
		{"/", "configured: alpha, beta", "the configured servers are listed"},
	} {
		resp, err := http.Get(h.url + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), tc.want) || !strings.Contains(string(body), "configured: alpha, beta") {
			t.Errorf("GET %s: %d %q, want 404 containing %s: %s", tc.path, resp.StatusCode, body, tc.want, tc.why)
		}
	}
}

func TestResourcesPromptsCompletion(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	ctx := context.Background()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("ping: %v", err)
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != testserver.HelloURI {
		t.Errorf("resources/list = %+v, %v", rl, err)
	}
	if _, err := cs.ListResourceTemplates(ctx, nil); err != nil {
		t.Errorf("resources/templates/list: %v", err)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: testserver.HelloURI})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello from testserver" {
		t.Errorf("resources/read = %+v, %v", rr, err)
	}
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 1 || pl.Prompts[0].Name != "greet" {
		t.Errorf("prompts/list = %+v, %v", pl, err)
	}
	pg, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || len(pg.Messages) != 1 || pg.Messages[0].Content.(*mcp.TextContent).Text != "Say hello to Ada" {
		t.Errorf("prompts/get = %+v, %v", pg, err)
	}
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "al"},
	})
	if err != nil || !slices.Equal(cr.Completion.Values, []string{"alice"}) {
		t.Errorf("completion/complete = %+v, %v", cr, err)
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "capsem://testserver/missing"})
	var w *jsonrpc.Error
	if !errors.As(err, &w) {
		t.Errorf("reading a missing resource: %v, want the server's JSON-RPC error", err)
	} else if ev := h.rec.calls("resources/read"); ev[len(ev)-1].ErrorMessage != w.Message {
		t.Errorf("recorded error %q, want %q", ev[len(ev)-1].ErrorMessage, w.Message)
	}
	for _, m := range []string{"ping", "resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete"} {
		if len(h.rec.calls(m)) == 0 {
			t.Errorf("no %s event", m)
		}
	}
}

// The gateway must stop a server that does not exit when its stdin closes.
func TestStopKillsStubbornServer(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	h := newHarness(t, decider{}, Config{}, Server{Name: "stubborn", Command: []string{"/bin/sh", "-c", "trap '' TERM; sleep 300 & wait"}})
	e, _, _ := h.g.lookup("stubborn")
	p, _, err := startProcess(e.backend().cfg, h.g.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.stop(100 * time.Millisecond)
	if !p.hasExited() || time.Since(start) > 3*time.Second {
		t.Errorf("stubborn server: exited %v after %v", p.hasExited(), time.Since(start))
	}
	if !strings.Contains(p.describe(), "killed") {
		t.Errorf("describe = %q, want it killed", p.describe())
	}
}
