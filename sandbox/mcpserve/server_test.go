package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lives is a Lifecycle over a map, for the logic of who may do what; the
// tools on real sandboxes are tests/mcp_serve_test.go's.
type lives struct {
	mu     sync.Mutex
	states map[string]string
	calls  []string
}

func (l *lives) Start(_ context.Context, name string, args []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf("start %s %q", name, args))
	l.states[name] = "running"
	return nil
}

func (l *lives) Stop(_ context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "stop "+name)
	l.states[name] = "stopped"
	return nil
}

func (l *lives) Remove(_ context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "rm "+name)
	delete(l.states, name)
	return nil
}

func (l *lives) List(context.Context) ([]Sandbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Sandbox
	for n, s := range l.states {
		out = append(out, Sandbox{Name: n, State: s})
	}
	return out, nil
}

func connect(t *testing.T, cfg Config, l *lives) *mcp.ClientSession {
	t.Helper()
	srv, err := New(cfg, l, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), r.IsError
}

func TestToolsAndSchemas(t *testing.T) {
	cs := connect(t, Config{Data: t.TempDir()}, &lives{states: map[string]string{}})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"sandbox_start": true, "sandbox_exec": true, "sandbox_write_file": true, "sandbox_read_file": true,
		"sandbox_ls": true, "sandbox_stop": true, "sandbox_rm": true, "sandbox_events": true}
	for _, tool := range res.Tools {
		if !want[tool.Name] {
			t.Errorf("unexpected tool %s", tool.Name)
		}
		delete(want, tool.Name)
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		// Every argument says what it means: the model reads these.
		raw, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]struct{ Description string } `json:"properties"`
			Required   []string                                `json:"required"`
		}
		_ = json.Unmarshal(raw, &schema)
		for arg, p := range schema.Properties {
			if p.Description == "" {
				t.Errorf("%s's argument %s has no description", tool.Name, arg)
			}
		}
		if tool.Name == "sandbox_exec" && strings.Join(schema.Required, ",") != "name,command" {
			t.Errorf("sandbox_exec requires %v, want name and command", schema.Required)
		}
	}
	if len(want) != 0 {
		t.Errorf("tools missing: %v", want)
	}
}

func TestWhoMayDoWhat(t *testing.T) {
	for _, tc := range []struct {
		why      string
		cfg      Config
		tool     string
		args     map[string]any
		states   map[string]string
		isError  bool
		says     string
		startArg string // the start call the lifecycle saw, "" for none
	}{
		{why: "a name outside the prefix is refused, with the name that would do", cfg: Config{AllowCreate: true},
			tool: "sandbox_start", args: map[string]any{"name": "dev"}, isError: true, says: `try "mcp-dev"`},
		{why: "the user's own sandbox is out of reach even when it exists", cfg: Config{AllowCreate: true},
			tool: "sandbox_stop", args: map[string]any{"name": "dev"}, states: map[string]string{"dev": "running"}, isError: true, says: "start with"},
		{why: "without --allow-create nothing is created", tool: "sandbox_start", args: map[string]any{"name": "mcp-a"},
			isError: true, says: "may not create"},
		{why: "without --allow-create an existing sandbox is started, its settings untouched", tool: "sandbox_start",
			args: map[string]any{"name": "mcp-a"}, states: map[string]string{"mcp-a": "stopped"}, says: "is running", startArg: `start mcp-a []`},
		{why: "a created sandbox gets the user's policy, workspace and secrets, nothing of the model's",
			cfg:  Config{AllowCreate: true, Policy: "/p.toml", Workspace: "/ws", Secrets: []string{"ANTHROPIC_API_KEY"}},
			tool: "sandbox_start", args: map[string]any{"name": "mcp-new"}, says: "created",
			startArg: `start mcp-new ["--policy" "/p.toml" "--workspace" "/ws" "--secret" "ANTHROPIC_API_KEY"]`},
		{why: "the model picks among the user's secrets by name; their hosts stay the user's",
			cfg:  Config{AllowCreate: true, Secrets: []string{"ANTHROPIC_API_KEY", "GH_TOKEN@api.github.com"}},
			tool: "sandbox_start", args: map[string]any{"name": "mcp-s", "secrets": []any{"GH_TOKEN"}}, says: "created",
			startArg: `start mcp-s ["--secret" "GH_TOKEN@api.github.com"]`},
		{why: "a secret the user did not offer is refused, naming those offered",
			cfg:  Config{AllowCreate: true, Secrets: []string{"ANTHROPIC_API_KEY"}},
			tool: "sandbox_start", args: map[string]any{"name": "mcp-s", "secrets": []any{"GH_TOKEN"}}, isError: true,
			says: "offers ANTHROPIC_API_KEY"},
		{why: "a model cannot bind a secret to a host of its choosing",
			cfg:  Config{AllowCreate: true, Secrets: []string{"GH_TOKEN@api.github.com"}},
			tool: "sandbox_start", args: map[string]any{"name": "mcp-s", "secrets": []any{"GH_TOKEN@evil.example"}}, isError: true,
			says: "not one this server offers"},
		{why: "secrets are for a sandbox being created", cfg: Config{AllowCreate: true, Secrets: []string{"ANTHROPIC_API_KEY"}},
			tool: "sandbox_start", args: map[string]any{"name": "mcp-a", "secrets": []any{"ANTHROPIC_API_KEY"}},
			states: map[string]string{"mcp-a": "stopped"}, isError: true, says: "keeps the secrets it was created with"},
		{why: "a running sandbox is not started again", tool: "sandbox_start", args: map[string]any{"name": "mcp-a"},
			states: map[string]string{"mcp-a": "running"}, says: "running already"},
		{why: "an argument the schema does not name is refused (the model cannot pass a policy)", cfg: Config{AllowCreate: true},
			tool: "sandbox_start", args: map[string]any{"name": "mcp-a", "policy": "/etc/evil.toml"}, isError: true, says: "policy"},
		{why: "without --allow-create nothing is removed", tool: "sandbox_rm", args: map[string]any{"name": "mcp-a"},
			states: map[string]string{"mcp-a": "running"}, isError: true, says: "may not remove"},
		{why: "with it, a sandbox under the prefix is", cfg: Config{AllowCreate: true}, tool: "sandbox_rm",
			args: map[string]any{"name": "mcp-a"}, states: map[string]string{"mcp-a": "running"}, says: "removed"},
		{why: "ls shows only the prefix's sandboxes", tool: "sandbox_ls", args: map[string]any{},
			states: map[string]string{"mcp-a": "running", "dev": "running"}, says: "mcp-a\trunning\n"},
		{why: "a command for a sandbox that does not exist says how to make one", tool: "sandbox_exec",
			args: map[string]any{"name": "mcp-none", "command": "true"}, isError: true, says: "sandbox_start creates it"},
		{why: "an empty command is refused", tool: "sandbox_exec", args: map[string]any{"name": "mcp-a", "command": " "},
			isError: true, says: "command is empty"},
		{why: "a timeout over the server's most is refused", tool: "sandbox_exec",
			args: map[string]any{"name": "mcp-a", "command": "true", "timeout_s": 99999}, isError: true, says: "at most 3600"},
		{why: "a file over the limit is refused before the sandbox is asked", cfg: Config{MaxFile: 4}, tool: "sandbox_write_file",
			args: map[string]any{"name": "mcp-a", "path": "/x", "content": "12345"}, isError: true, says: "over this server's limit of 4"},
		{why: "content that claims base64 and is not is refused", tool: "sandbox_write_file",
			args: map[string]any{"name": "mcp-a", "path": "/x", "content": "!!", "base64": true}, isError: true, says: "not base64"},
		{why: "an events limit out of range is refused", tool: "sandbox_events", args: map[string]any{"name": "mcp-a", "limit": 501},
			isError: true, says: "want 1 to 500"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Data = t.TempDir()
			states := map[string]string{}
			for k, v := range tc.states {
				states[k] = v
			}
			l := &lives{states: states}
			got, isErr := call(t, connect(t, cfg, l), tc.tool, tc.args)
			if isErr != tc.isError || !strings.Contains(got, tc.says) {
				t.Errorf("%s %v: isError %v %q, want isError %v and %q", tc.tool, tc.args, isErr, got, tc.isError, tc.says)
			}
			var starts []string
			for _, c := range l.calls {
				if strings.HasPrefix(c, "start ") {
					starts = append(starts, c)
				}
			}
			if want := tc.startArg; (want == "" && len(starts) > 0) || (want != "" && (len(starts) != 1 || starts[0] != want)) {
				t.Errorf("start calls %q, want %q", starts, want)
			}
		})
	}
}

func TestHTTPNeedsTheToken(t *testing.T) {
	srv, err := New(Config{Data: t.TempDir()}, &lives{states: map[string]string{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(Handler(srv, "s3cret"))
	defer ts.Close()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		why, auth string
		want      int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a wrong token", "Bearer nope", http.StatusUnauthorized},
		{"the token without its scheme", "s3cret", http.StatusUnauthorized},
		{"the token", "Bearer s3cret", http.StatusOK},
	} {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.why, resp.StatusCode, tc.want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		why string
		cfg Config
		ok  bool
	}{
		{"the defaults", Config{Data: "/d"}, true},
		{"no data directory", Config{}, false},
		{"a prefix no name can start with", Config{Data: "/d", Prefix: "-x"}, false},
		{"upper case is not in names", Config{Data: "/d", Prefix: "MCP-"}, false},
		{"a prefix of its own", Config{Data: "/d", Prefix: "agent7-"}, true},
	} {
		if err := tc.cfg.Check(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.why, err)
		}
	}
}
