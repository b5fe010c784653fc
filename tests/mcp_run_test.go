package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// mcpMarker is what claude is scripted to have the gateway's echo tool
	// return: seen in the tool_result claude sends back, it proves the tool
	// ran on the host through mcp.capsem.internal.
	mcpMarker = "capsem-mcp-marker"
	// mcpEchoCase and mcpEnvCase are in the prompt of each claude run, so
	// that one fake API, one VM, can script both conversations.
	mcpEchoCase = "[capsem-case:echo]"
	mcpEnvCase  = "[capsem-case:env]"
)

// claudeGuestMCPFlags are capsem run's --env flags for claude in the guest
// against the fake API with a gateway MCP server. The fake API calls only
// a tool the request offers, and claude 2.1.330 offers MCP tools in its
// first request only with ENABLE_TOOL_SEARCH=false (else they are deferred
// behind its ToolSearch tool: the first run of TestMCPRunClaudeInTheGuest
// saw 12 tools, none mcp__tools__*) and MCP_CONNECTION_NONBLOCKING=0 (else
// -p sends the first request before the server is connected and offers
// WaitForMcpServers instead: the second run saw 22 tools, none
// mcp__tools__*; with both, 30 tools, the six of the server among them).
func claudeGuestMCPFlags() []string {
	var flags []string
	for _, kv := range []string{"ANTHROPIC_API_KEY=sk-ant-api03-capsem-test-key-not-a-secret", "DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		"ENABLE_TOOL_SEARCH=false", "MCP_CONNECTION_NONBLOCKING=0"} {
		flags = append(flags, "--env", kv)
	}
	return flags
}

// mcpCaseFakes is the fake api.anthropic.com of TestMCPRunClaudeInTheGuest:
// each Messages request goes to the fakeAnthropic scripted for the case
// its prompt names (any other request to echo's), and the names of the
// tools every Messages request offered are kept, so that a test can tell
// "claude never saw the tool" from "the tool failed".
type mcpCaseFakes struct {
	echo, env *fakeAnthropic

	mu      sync.Mutex
	offered map[string]bool
}

func (m *mcpCaseFakes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req fakeMessagesRequest
	if r.URL.Path == "/v1/messages" && json.Unmarshal(body, &req) == nil {
		m.mu.Lock()
		for _, t := range req.Tools {
			m.offered[t.Name] = true
		}
		m.mu.Unlock()
	}
	if bytes.Contains(body, []byte(mcpEnvCase)) {
		m.env.ServeHTTP(w, r)
		return
	}
	m.echo.ServeHTTP(w, r)
}

func (m *mcpCaseFakes) offeredNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.offered))
}

func (m *mcpCaseFakes) wasOffered(tool string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offered[tool]
}

// mcpCallRow is the part of an mcp_calls row the test reads.
type mcpCallRow struct {
	id                                    int64
	server, method, tool, decision        string
	request, response, reason, rule, errm string
	ms                                    float64
}

func (r mcpCallRow) String() string {
	return fmt.Sprintf("id=%d server=%q method=%q tool=%q decision=%q reason=%q rule=%q duration_ms=%.3f error=%q request=%q response=%q",
		r.id, r.server, r.method, r.tool, r.decision, r.reason, r.rule, r.ms, r.errm, r.request, r.response)
}

// TestMCPRunClaudeInTheGuest is the MCP gateway's test with a real
// client: the real claude CLI in the real guest is given the gateway's
// stdio server (capsem mcp-test-server, run on the host) with `claude mcp
// add --transport http tools https://mcp.capsem.internal/tools`, and the
// fake api.anthropic.com has it call the server's tools. In one boot (a
// guest boot is the expensive part, ~20 s under TCG) two conversations:
//
//   - echo, allowed: the tool's output reaches the model in the tool_result,
//     the export has the tools/call as an allowed mcp_calls row of server
//     "tools" and claude's mcp__tools__echo as a tool_calls row with origin
//     mcp linked to it, and capsem inspect's link checks pass;
//   - env, denied by [[mcp.rules]] (hide_denied off, so that claude is
//     offered it and tries): the tool_result holds capsem's refusal naming
//     the rule, and the mcp_calls row is denied with mcp-tool-denied.
func TestMCPRunClaudeInTheGuest(t *testing.T) {
	needGuest(t)
	ca := newTestCA(t, "tests upstream CA")
	fakes := &mcpCaseFakes{
		echo: &fakeAnthropic{
			tool:  "mcp__tools__echo",
			input: map[string]any{"text": mcpMarker},
			final: claudeFinal,
		},
		env: &fakeAnthropic{
			tool:  "mcp__tools__env",
			input: map[string]any{"name": "CAPSEM_MCP_TEST_TOKEN"},
			final: claudeFinal,
		},
		offered: map[string]bool{},
	}
	port := startHTTPS(t, ca, fakes, "api.anthropic.com")
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.toml")
	// The server's env holds a token that the denied env tool would hand
	// the guest: the refusal must keep it on the host.
	const token = "capsem-mcp-host-token-not-for-the-guest"
	if err := os.WriteFile(pol, []byte(fmt.Sprintf(`
[network]
default = "deny"
allow = ["api.anthropic.com:443"]

[upstream]
resolve = { "api.anthropic.com" = "127.0.0.1:%d" }
ca_files = [%q]

[mcp]
hide_denied = false

[[mcp.rules]]
server = "tools"
tools = ["env"]
action = "deny"

[mcp.servers.tools]
command = [%q, "mcp-test-server"]
env = { CAPSEM_MCP_TEST_TOKEN = %q }
`, port, ca.pemPath, capsemBin, token)), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")

	// --allowedTools lets claude -p run the one tool without asking (and
	// --dangerously-skip-permissions is refused to root, which the guest's
	// command runs as).
	script := `set -e
export HOME=/tmp/claude-home
mkdir -p "$HOME"
cd /workspace
claude mcp add --transport http tools https://mcp.capsem.internal/tools
echo "--- mcp list"
claude mcp list || true
echo "--- echo"
claude -p "Call the echo tool of the tools server. ` + mcpEchoCase + `" --allowedTools mcp__tools__echo
echo "--- env"
claude -p "Call the env tool of the tools server. ` + mcpEnvCase + `" --allowedTools mcp__tools__env
echo "--- done"`
	start := time.Now()
	r := capsemRun(t, runOpts{policy: pol, data: data}, claudeGuestMCPFlags(), "sh", "-c", script)
	t.Logf("capsem run took %v\nstdout:\n%s\nthe fake API saw (echo):\n%sthe fake API saw (env):\n%s",
		time.Since(start).Round(time.Millisecond), r.stdout, fakes.echo.log(), fakes.env.log())
	if r.code != 0 || !strings.Contains(r.stdout, "--- done") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, tool := range []string{"mcp__tools__echo", "mcp__tools__env"} {
		if !fakes.wasOffered(tool) {
			t.Errorf("claude never offered the model %s (it offered %v): the gateway's tools did not reach it (is the server in `claude mcp list` above?)", tool, fakes.offeredNames())
		}
	}

	// What claude sent back to the model as each tool's result.
	result := func(f *fakeAnthropic) (string, bool) {
		for _, q := range f.seen() {
			if q.Answer == "final" {
				return q.ToolResult, true
			}
		}
		return "", false
	}
	echoResult, ok := result(fakes.echo)
	if !ok || !strings.Contains(echoResult, mcpMarker) {
		t.Errorf("the echo tool_result claude sent is %q (sent: %v), want the marker %q the tool returned through the gateway", echoResult, ok, mcpMarker)
	}
	if !strings.Contains(r.stdout, claudeFinal+" The tool said: ") {
		t.Errorf("claude did not print the final answer\nstdout:\n%s", r.stdout)
	}
	envResult, ok := result(fakes.env)
	if !ok || !strings.Contains(envResult, "capsem:") || !strings.Contains(envResult, "mcp.rules[1]") {
		t.Errorf("the env tool_result claude sent is %q (sent: %v), want capsem's refusal naming mcp.rules[1]", envResult, ok)
	}
	if strings.Contains(r.stdout+r.stderr+envResult, token) {
		t.Errorf("the token in the server's env reached the guest")
	}

	// The export: the MCP calls and the tool calls linked to them.
	db := exportRun(t, data, r.session)
	rows, err := db.Query(`SELECT id, coalesce(server_name, ''), coalesce(method, ''), coalesce(tool_name, ''), coalesce(decision, ''),
		coalesce(request_preview, ''), coalesce(response_preview, ''), coalesce(reason, ''), coalesce(matched_rule, ''), coalesce(error_message, ''), duration_ms
		FROM mcp_calls ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var calls []mcpCallRow
	var dump strings.Builder
	for rows.Next() {
		var c mcpCallRow
		if err := rows.Scan(&c.id, &c.server, &c.method, &c.tool, &c.decision, &c.request, &c.response, &c.reason, &c.rule, &c.errm, &c.ms); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
		fmt.Fprintf(&dump, "  %s\n", c)
	}
	rows.Close()
	t.Logf("mcp_calls:\n%s", dump.String())
	var echoCall, envCall *mcpCallRow
	for i, c := range calls {
		if c.method != "tools/call" {
			continue
		}
		switch c.tool {
		case "echo":
			echoCall = &calls[i]
		case "env":
			envCall = &calls[i]
		}
	}
	switch {
	case echoCall == nil:
		t.Errorf("no mcp_calls row of the echo tools/call")
	case echoCall.server != "tools" || echoCall.decision != "allowed" || !strings.Contains(echoCall.response, mcpMarker):
		t.Errorf("echo's mcp_calls row %s: want server tools, allowed, the marker in response_preview", echoCall)
	}
	switch {
	case envCall == nil:
		t.Errorf("no mcp_calls row of the env tools/call")
	case envCall.server != "tools" || envCall.decision != "denied" || envCall.reason != "mcp-tool-denied" || !strings.HasPrefix(envCall.rule, "mcp.rules[1] "):
		t.Errorf("env's mcp_calls row %s: want server tools, denied, reason mcp-tool-denied, matched rule mcp.rules[1]", envCall)
	}
	for _, c := range calls {
		if strings.Contains(c.server, "mcp.capsem.internal") {
			t.Errorf("a gateway call recorded under the gateway's host too: %s", c)
		}
		if strings.Contains(c.response, token) {
			t.Errorf("the server's token is in an mcp_calls response: %s", c)
		}
	}

	// claude's tool calls, origin mcp, each linked to the MCP call that
	// executed it.
	links := map[string]int64{}
	var tcDump strings.Builder
	tcRows, err := db.Query(`SELECT coalesce(tool_name, ''), coalesce(origin, ''), coalesce(mcp_call_id, 0) FROM tool_calls ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for tcRows.Next() {
		var name, origin string
		var link int64
		if err := tcRows.Scan(&name, &origin, &link); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&tcDump, "  tool_name=%s origin=%s mcp_call_id=%d\n", name, origin, link)
		if origin == "mcp" {
			links[name] = link
		}
	}
	tcRows.Close()
	t.Logf("tool_calls:\n%s", tcDump.String())
	for name, want := range map[string]*mcpCallRow{"mcp__tools__echo": echoCall, "mcp__tools__env": envCall} {
		got, ok := links[name]
		switch {
		case !ok:
			t.Errorf("no tool_calls row %s with origin mcp", name)
		case want != nil && got != want.id:
			t.Errorf("tool call %s links mcp_call_id %d, want %d (the row of its tools/call)", name, got, want.id)
		}
	}

	// capsem inspect checks the links (and the rest) itself.
	out, err := exec.Command(capsemBin, "inspect", "--data", data, "--ca-dir", sharedCADir, r.session).CombinedOutput()
	t.Logf("capsem inspect:\n%s", out)
	if err != nil {
		t.Errorf("capsem inspect: %v", err)
	}
	if !strings.Contains(string(out), "every mcp_call_id names a tools/call of its tool") {
		t.Errorf("capsem inspect did not run its MCP link check\n%s", out)
	}
}
