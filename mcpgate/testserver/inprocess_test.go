package testserver

import (
	"context"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect serves srv over in-memory transports and returns a client
// session to it.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("tools/call %s: tool error %+v", tool, res.Content)
	}
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func TestNewInProcessTools(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  func() *mcp.Server
		want []string
		why  string
	}{
		{"process", New, []string{"add", "calls", "crash", "echo", "env", "slow"}, "a server process of its own may be crashed to test restarts"},
		{"in-process", func() *mcp.Server { return NewInProcess(nil) }, []string{"add", "calls", "echo", "env", "slow"}, "crash would os.Exit the program hosting the server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := toolNames(t, connect(t, tc.srv())); !slices.Equal(got, tc.want) {
				t.Errorf("tools %v, want %v: %s", got, tc.want, tc.why)
			}
		})
	}
}

func TestNewInProcessEnv(t *testing.T) {
	const hostVar = "CAPSEM_TESTSERVER_HOST_ONLY"
	t.Setenv(hostVar, "host-secret")
	env := map[string]string{"MARK": "given"}
	cs := connect(t, NewInProcess(env))
	env["MARK"] = "changed after"
	for _, tc := range []struct {
		name, want, why string
	}{
		{"MARK", "given", "a name in the map answers its value as given, not as the caller's map changed later"},
		{hostVar, "", "the host program's environment never answers"},
		{"PATH", "", "not even the variables every process has"},
		{"ABSENT", "", "a name the map lacks answers empty"},
	} {
		if got := callText(t, cs, "env", map[string]any{"name": tc.name}); got != tc.want {
			t.Errorf("env %s = %q, want %q: %s", tc.name, got, tc.want, tc.why)
		}
	}
	// The calls tool still counts the env calls, as the doctor's guest
	// tests rely on.
	if got := callText(t, cs, "calls", nil); got != "4" {
		t.Errorf("calls = %s after 4 env calls, want 4", got)
	}
}

func TestNewInProcessCrashUnknown(t *testing.T) {
	cs := connect(t, NewInProcess(nil))
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crash"})
	// The SDK answers an unknown tool with a JSON-RPC error or a tool
	// error; either way, this test process is still here to check it.
	if err == nil && !res.IsError {
		t.Errorf("tools/call crash on the in-process server succeeded: %+v", res.Content)
	}
}
