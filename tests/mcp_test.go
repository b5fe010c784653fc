package tests

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/tests/harness"
)

// The MCP tests run the official TypeScript SDK (@modelcontextprotocol/sdk)
// as the guest's client, in the namespace, against
// @modelcontextprotocol/server-everything run on the host: as a stdio
// server of capsem's gateway, and as a remote server (streamable HTTP, and
// the older HTTP+SSE transport) behind an allowed name that the MITM sees.
// A second remote server, written with the same SDK's server classes,
// answers streamable HTTP with JSON instead of an event stream, which
// server-everything cannot be told to do. Each test asserts what the SDK
// client got and the mcp_calls rows of `capsem export --sqlite`.

// mcpSDKVersion and mcpEverythingVersion are the npm packages the tests
// run, the newest at the time of pinning; Taskfile.yml deps:npm installs
// the same versions under .cache/npm.
const (
	mcpSDKVersion        = "1.32.2"
	mcpEverythingVersion = "2026.8.31"
	mcpInstall           = "go tool task deps:npm"
)

// mcpNodeModules returns the repo's .cache/npm/node_modules holding the
// pinned SDK and server-everything, or skips the test when they are not
// installed there or node is missing.
func mcpNodeModules(t *testing.T) string {
	t.Helper()
	if why := harness.Requirements(append(guestTools, "node")...); why != "" {
		t.Skip("namespace harness unavailable: " + why)
	}
	dir, err := filepath.Abs("../.cache/npm/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	for pkg, want := range map[string]string{
		"@modelcontextprotocol/sdk":               mcpSDKVersion,
		"@modelcontextprotocol/server-everything": mcpEverythingVersion,
	} {
		b, err := os.ReadFile(filepath.Join(dir, pkg, "package.json"))
		var pj struct{ Version string }
		if err != nil || json.Unmarshal(b, &pj) != nil {
			t.Skipf("%s %s is not installed under .cache/npm (CI installs it; run `%s` at the repo root)", pkg, want, mcpInstall)
		}
		if pj.Version != want {
			t.Skipf("%s under .cache/npm is %s, the tests pin %s (run `%s`)", pkg, pj.Version, want, mcpInstall)
		}
	}
	return dir
}

// mcpEverything is server-everything's entry point (its package's bin).
func mcpEverything(modules string) string {
	return filepath.Join(modules, "@modelcontextprotocol/server-everything/dist/index.js")
}

// mcpClientJS is the tests' MCP client: the SDK's Client over
// StreamableHTTPClientTransport (a bearer token in the plan's token, when
// set), SSEClientTransport for the older HTTP+SSE transport, or
// StdioClientTransport running the plan's command with its args (and env,
// on top of the few variables the SDK passes). argv[2] is the plan
// ({url, transport, steps, …}); it prints one JSON line with what each step
// got — a tool list, a tool's result (text and structured content), or the
// error the SDK rejected with — or the error connecting.
const mcpClientJS = `
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { SSEClientTransport } = require("@modelcontextprotocol/sdk/client/sse.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const plan = JSON.parse(process.argv[2]);
const out = { steps: [] };
// A pipe's writes are asynchronous in node: exit once the line is out.
const done = o => process.stdout.write(JSON.stringify(o) + "\n", () => process.exit(0));
(async () => {
  const transport = plan.transport === "stdio"
    ? new StdioClientTransport({ command: plan.command, args: plan.args, env: plan.env, stderr: "inherit" })
    : plan.transport === "sse" ? new SSEClientTransport(new URL(plan.url))
    : new StreamableHTTPClientTransport(new URL(plan.url),
        plan.token ? { requestInit: { headers: { Authorization: "Bearer " + plan.token } } } : undefined);
  const client = new Client({ name: "capsem-tests", version: "1.0.0" }, { capabilities: {} });
  try {
    await client.connect(transport);
  } catch (e) {
    return done({ connectError: String(e.message) });
  }
  out.sessionId = transport.sessionId || "";
  out.instructions = client.getInstructions() || "";
  for (const s of plan.steps) {
    try {
      if (s.op === "list") {
        const r = await client.listTools();
        out.steps.push({ ok: true, tools: r.tools.map(t => t.name) });
      } else {
        const r = await client.callTool({ name: s.name, arguments: s.args || {} }, undefined, { timeout: 600000 });
        out.steps.push({ ok: true, isError: !!r.isError, structured: r.structuredContent || null,
          text: (r.content || []).filter(c => c.type === "text").map(c => c.text).join("\n") });
      }
    } catch (e) {
      out.steps.push({ ok: false, code: e.code, message: String(e.message) });
    }
  }
  await client.close();
  done(out);
})().catch(e => { console.error("client failed:", e); process.exit(1); });
`

// mcpJSONServerJS is a streamable-HTTP server written with the SDK's
// McpServer and StreamableHTTPServerTransport with enableJsonResponse: each
// POST is answered with application/json, not an event stream. Sessions as
// server-everything keeps them. PORT is its port on 127.0.0.1.
const mcpJSONServerJS = `
const http = require("node:http");
const { randomUUID } = require("node:crypto");
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StreamableHTTPServerTransport } = require("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { z } = require("zod");
const transports = new Map();
http.createServer(async (req, res) => {
  const sid = req.headers["mcp-session-id"];
  let t = sid && transports.get(sid);
  if (!t) {
    if (sid) { res.writeHead(404).end(); return; }
    t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true,
      onsessioninitialized: id => transports.set(id, t) });
    const s = new McpServer({ name: "capsem-json-test", version: "1.0.0" });
    s.registerTool("echo", { description: "Echoes back the input string", inputSchema: { message: z.string() } },
      async ({ message }) => ({ content: [{ type: "text", text: "Echo: " + message }] }));
    s.registerTool("get-env", { description: "Returns all environment variables" },
      async () => ({ content: [{ type: "text", text: JSON.stringify(process.env) }] }));
    await s.connect(t);
  }
  await t.handleRequest(req, res);
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.error("listening on " + process.env.PORT));
`

// mcpStep is one step of the client's plan: "list" (tools/list) or
// "call" (tools/call of Name with Args).
type mcpStep struct {
	Op   string         `json:"op"`
	Name string         `json:"name,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// mcpStepResult is what the SDK client got for one step.
type mcpStepResult struct {
	OK      bool     `json:"ok"`      // the SDK resolved (a tool's isError result included)
	Tools   []string `json:"tools"`   // list: the names
	IsError bool     `json:"isError"` // call: the result's isError
	Text    string   `json:"text"`    // call: the result's text content
	// Structured is the call's structured content, when the tool gave one.
	Structured map[string]any `json:"structured"`
	Code       int            `json:"code"`    // the JSON-RPC error code the SDK rejected with
	Message    string         `json:"message"` // the SDK's error message ("MCP error CODE: message")
}

// rpcMessage is the JSON-RPC error's message without the SDK's
// "MCP error CODE: " prefix.
func (r mcpStepResult) rpcMessage() string {
	return strings.TrimPrefix(r.Message, fmt.Sprintf("MCP error %d: ", r.Code))
}

// mcpClient runs the SDK client in the guest, trusting capsem's CA through
// NODE_EXTRA_CA_CERTS, and returns what each step got.
func (e *env) mcpClient(modules, rawURL, transport string, steps ...mcpStep) []mcpStepResult {
	e.t.Helper()
	script := filepath.Join(e.t.TempDir(), "mcp-client.cjs")
	if err := os.WriteFile(script, []byte(mcpClientJS), 0o644); err != nil {
		e.t.Fatal(err)
	}
	plan, _ := json.Marshal(map[string]any{"url": rawURL, "transport": transport, "steps": steps})
	out, err := e.runEnv(90*time.Second, append(e.trustEnv(), "NODE_PATH="+modules), "node", script, string(plan))
	if err != nil {
		e.t.Fatalf("the MCP client (%s %s): %v\n%s", transport, rawURL, err, out)
	}
	var res struct{ Steps []mcpStepResult }
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if json.Unmarshal([]byte(lines[len(lines)-1]), &res) != nil || len(res.Steps) != len(steps) {
		e.t.Fatalf("the MCP client (%s %s) printed:\n%s", transport, rawURL, out)
	}
	return res.Steps
}

// startNode runs a node program on the host with PORT set to a free port
// of loopback and waits until it listens there; the test's end kills it.
func startNode(t *testing.T, modules string, args ...string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	out := &harness.SyncBuffer{}
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "NODE_PATH="+modules)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("node %s output:\n%s", strings.Join(args, " "), out.String())
		}
	})
	if err := waitListening(port, 20*time.Second); err != nil {
		t.Fatalf("node %s: %v:\n%s", strings.Join(args, " "), err, out.String())
	}
	return port
}

// mcpUpstreamLog keeps what reached a plain-HTTP MCP server through
// mcpFront: each request's method, path, body and the response's
// Content-Type.
type mcpUpstreamLog struct {
	mu   sync.Mutex
	reqs []mcpUpstreamReq
}

type mcpUpstreamReq struct {
	method, path string
	body         []byte
	respType     string
}

// posts returns the POSTs whose body contains s.
func (l *mcpUpstreamLog) posts(s string) []mcpUpstreamReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []mcpUpstreamReq
	for _, r := range l.reqs {
		if r.method == http.MethodPost && bytes.Contains(r.body, []byte(s)) {
			out = append(out, r)
		}
	}
	return out
}

// mcpFront serves the plain-HTTP server on port over TLS, with a leaf of ca
// for names, as a remote MCP server is reached: server-everything speaks
// only plain HTTP. Responses are flushed as they come, so event streams
// stay streams.
func mcpFront(t *testing.T, ca *testCA, port int, names ...string) (int, *mcpUpstreamLog) {
	t.Helper()
	log := &mcpUpstreamLog{}
	target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			r := resp.Request
			body, _ := r.Context().Value(mcpBodyKey{}).([]byte)
			log.mu.Lock()
			log.reqs = append(log.reqs, mcpUpstreamReq{method: r.Method, path: r.URL.Path, body: body, respType: resp.Header.Get("Content-Type")})
			log.mu.Unlock()
			return nil
		},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r = r.WithContext(context.WithValue(r.Context(), mcpBodyKey{}, body))
		rp.ServeHTTP(w, r)
	})
	return startHTTPS(t, ca, h, names...), log
}

// mcpBodyKey carries a request's body from mcpFront's handler to the
// proxy's ModifyResponse, which logs it with the response's type.
type mcpBodyKey struct{}

// mcpRuleLine returns the line of the n-th (from 1) "[[mcp.rules]]" header
// of policy, as capsem's rule names count lines.
func mcpRuleLine(policy string, n int) int {
	for i, l := range strings.Split(policy, "\n") {
		if strings.TrimSpace(l) == "[[mcp.rules]]" {
			if n--; n == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// mcpRow is one mcp_calls row of an export.
type mcpRow struct {
	server, method, tool, requestID, reqPreview, respPreview string
	decision, reason, rule, errMsg                           string
	durationMS                                               float64
	sent, recv                                               int64
}

func mcpRows(t *testing.T, db *sql.DB) []mcpRow {
	t.Helper()
	rows, err := db.Query(`SELECT coalesce(server_name,''), coalesce(method,''), coalesce(tool_name,''), coalesce(request_id,''),
		coalesce(request_preview,''), coalesce(response_preview,''), coalesce(decision,''), coalesce(reason,''), coalesce(matched_rule,''),
		coalesce(error_message,''), duration_ms, bytes_sent, bytes_received FROM mcp_calls ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []mcpRow
	for rows.Next() {
		var r mcpRow
		if err := rows.Scan(&r.server, &r.method, &r.tool, &r.requestID, &r.reqPreview, &r.respPreview, &r.decision, &r.reason, &r.rule,
			&r.errMsg, &r.durationMS, &r.sent, &r.recv); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func dumpMCPRows(rows []mcpRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  server=%q method=%q tool=%q id=%q decision=%s reason=%q rule=%q err=%q dur=%.3fms sent=%d recv=%d req=%.80q resp=%.80q\n",
			r.server, r.method, r.tool, r.requestID, r.decision, r.reason, r.rule, r.errMsg, r.durationMS, r.sent, r.recv, r.reqPreview, r.respPreview)
	}
	return b.String()
}

// logMCPRowsOnFailure logs every mcp_calls row when the test has failed.
func logMCPRowsOnFailure(t *testing.T, rows []mcpRow) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcp_calls:\n%s", dumpMCPRows(rows))
		}
	})
}

// findMCP returns the rows matching server, method and (when not "") tool.
func findMCP(rows []mcpRow, server, method, tool string) []mcpRow {
	var out []mcpRow
	for _, r := range rows {
		if r.server == server && r.method == method && (tool == "" || r.tool == tool) {
			out = append(out, r)
		}
	}
	return out
}

// checkDenied asserts what the SDK client got for a refused tools/call:
// the SDK rejected with capsem's JSON-RPC error naming the rule and tool.
func checkDenied(t *testing.T, what string, r mcpStepResult, rule, tool string) {
	t.Helper()
	msg := r.rpcMessage()
	if r.OK || !strings.HasPrefix(msg, "capsem:") || !strings.Contains(msg, rule) || !strings.Contains(msg, fmt.Sprintf("%q", tool)) {
		t.Errorf("%s: the denied tools/call of %s got %+v; want the SDK to reject with a JSON-RPC error starting \"capsem:\" naming %q", what, tool, r, rule)
	}
}

// checkDeniedRow asserts the one mcp_calls row of a refused tools/call.
func checkDeniedRow(t *testing.T, rows []mcpRow, server, tool, rule string) {
	t.Helper()
	got := findMCP(rows, server, "tools/call", tool)
	if len(got) != 1 || got[0].decision != "denied" || got[0].reason != "mcp-tool-denied" || got[0].rule != rule || got[0].requestID == "" ||
		!strings.HasPrefix(got[0].errMsg, "capsem:") {
		t.Errorf("want one denied tools/call row of %s on %s (reason mcp-tool-denied, matched_rule %q, a request id, capsem's error); mcp_calls:\n%s", tool, server, rule, dumpMCPRows(rows))
	}
}

// checkAllowedCall asserts the allowed tools/call row of tool on server:
// its id, a duration, its sizes and the response's text in its preview.
func checkAllowedCall(t *testing.T, rows []mcpRow, server, tool, want string) {
	t.Helper()
	got := findMCP(rows, server, "tools/call", tool)
	if len(got) != 1 {
		t.Errorf("%d tools/call rows of %s on %s, want 1; mcp_calls:\n%s", len(got), tool, server, dumpMCPRows(rows))
		return
	}
	r := got[0]
	if r.decision != "allowed" || r.requestID == "" || r.durationMS <= 0 || r.sent <= 0 || r.recv <= 0 ||
		!strings.Contains(r.reqPreview, tool) && !strings.Contains(r.reqPreview, "capsem-mcp-hello") || !strings.Contains(r.respPreview, want) {
		t.Errorf("the tools/call of %s on %s: %s want allowed, a request id, duration, sizes and %q in the response preview", tool, server, dumpMCPRows(got), want)
	}
}

func TestMCPGatewayStdioServer(t *testing.T) {
	modules := mcpNodeModules(t)
	// A variable of capsem-net's own environment: no stdio server may see it.
	const leak = "CAPSEM_MCP_TEST_LEAK"
	t.Setenv(leak, "capsem-net-only")
	ev := mcpEverything(modules)
	policy := fmt.Sprintf(`
[mcp.servers.everything]
command = ["node", %[1]q, "stdio"]

[mcp.servers.envdump]
command = ["node", %[1]q, "stdio"]
env = { MARK = "x" }

[mcp.servers.scanned]
command = ["node", %[1]q, "stdio"]

[[mcp.rules]]
server = "everything"
tools = ["get-env"]
action = "deny"

[[secret]]
name = "GW_TOKEN"
from_env = "CAPSEM_TEST_GW_TOKEN"
hosts = ["api.other.test"]
`, ev)
	t.Setenv("CAPSEM_TEST_GW_TOKEN", "gw-real-value-0123456789")
	rule := fmt.Sprintf("mcp.rules[1] (line %d) server=everything tools=get-env action=deny", mcpRuleLine(policy, 1))
	e := startEnv(t, policy, envOptions{})

	got := e.mcpClient(modules, "https://mcp.capsem.internal/everything", "streamable",
		mcpStep{Op: "list"},
		mcpStep{Op: "call", Name: "echo", Args: map[string]any{"message": "capsem-mcp-hello"}},
		mcpStep{Op: "call", Name: "get-env"})
	if !got[0].OK || !slices.Contains(got[0].Tools, "echo") || slices.Contains(got[0].Tools, "get-env") {
		t.Errorf("tools/list through the gateway: %+v; want echo listed and the denied get-env hidden", got[0])
	}
	if !got[1].OK || got[1].IsError || got[1].Text != "Echo: capsem-mcp-hello" {
		t.Errorf("echo through the gateway: %+v", got[1])
	}
	checkDenied(t, "gateway", got[2], rule, "get-env")

	// The gateway's servers reach the outside with the host's
	// credentials: what the guest sends them is scanned like any egress —
	// a secret's placeholder is refused (the gateway's servers are not the
	// secret's hosts), a credential is a DLP finding.
	ph := e.placeholders()["GW_TOKEN"]
	scanned := e.mcpClient(modules, "https://mcp.capsem.internal/scanned", "streamable",
		mcpStep{Op: "call", Name: "echo", Args: map[string]any{"message": "the key is " + ph}},
		mcpStep{Op: "call", Name: "echo", Args: map[string]any{"message": "token ghp_" + strings.Repeat("A1b2C3d4E5", 4)[:36]}})
	if scanned[0].OK || scanned[0].Code != 403 || !strings.Contains(scanned[0].Message, "secret GW_TOKEN") {
		t.Errorf("a placeholder sent to the gateway: %+v; want the request refused (403)", scanned[0])
	}
	if !scanned[1].OK {
		t.Errorf("a credential under [dlp] action log: %+v; want it through, and noted", scanned[1])
	}

	// The same server under another name, get-env allowed: the stdio
	// server's whole environment is PATH, HOME and its env.
	env := e.mcpClient(modules, "https://mcp.capsem.internal/envdump", "streamable", mcpStep{Op: "call", Name: "get-env"})
	var vars map[string]string
	if !env[0].OK || env[0].IsError || json.Unmarshal([]byte(env[0].Text), &vars) != nil {
		t.Fatalf("get-env on envdump: %+v", env[0])
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range vars {
			if !yield(k) {
				return
			}
		}
	})
	if _, ok := vars[leak]; ok || vars["MARK"] != "x" || vars["PATH"] == "" || !slices.Equal(keys, []string{"HOME", "MARK", "PATH"}) {
		t.Errorf("the stdio server's environment is %v; want exactly PATH, HOME and MARK=x (never capsem-net's %s)", keys, leak)
	}

	evs := e.stop()
	if n := netEvent(evs, func(n *store.Net) bool { return n.Domain == "mcp.capsem.internal" && n.Reason == "secret-wrong-host" }); n == nil || n.Decision != store.Denied || n.MatchedRule != "GW_TOKEN" {
		t.Errorf("no denied secret-wrong-host event of the gateway request: %+v", n)
	}
	if n := netEvent(evs, func(n *store.Net) bool { return n.Domain == "mcp.capsem.internal" && n.Reason == "dlp-match" }); n == nil || !strings.HasPrefix(n.MatchedRule, "github-token@body") {
		t.Errorf("no dlp-match event of the gateway request: %+v", n)
	}
	rows := mcpRows(t, claudeExport(t, e.dataDir))
	logMCPRowsOnFailure(t, rows)
	for _, m := range []string{"initialize", "tools/list"} {
		if len(findMCP(rows, "everything", m, "")) == 0 {
			t.Errorf("no %s row with server_name everything; mcp_calls:\n%s", m, dumpMCPRows(rows))
		}
	}
	checkAllowedCall(t, rows, "everything", "echo", "Echo: capsem-mcp-hello")
	checkDeniedRow(t, rows, "everything", "get-env", rule)
	if c := findMCP(rows, "envdump", "tools/call", "get-env"); len(c) != 1 || c[0].decision != "allowed" {
		t.Errorf("want one allowed get-env row on envdump; mcp_calls:\n%s", dumpMCPRows(rows))
	}
	for _, r := range rows {
		if strings.HasPrefix(r.server, "mcp.capsem.internal") {
			t.Errorf("a gateway call recorded under the gateway's host too: %s", dumpMCPRows([]mcpRow{r}))
		}
	}
}

// mcpRemote is a guest whose allowed names reach MCP servers on the host
// through capsem's MITM: mcp.test is server-everything over streamable
// HTTP (event-stream responses), json.test the SDK server answering JSON,
// sse.test server-everything over the older HTTP+SSE transport. get-env is
// denied on all three.
type mcpRemote struct {
	*env
	modules             string
	everything, js, sse *mcpUpstreamLog
	policy              string
}

// rule returns the name of host's deny rule in the policy in force.
func (m *mcpRemote) rule(host string) string {
	n, tools := map[string]int{"mcp.test": 1, "json.test": 2, "sse.test": 3}[host], "get-env"
	if host == "json.test" {
		tools = "get-*"
	}
	return fmt.Sprintf("mcp.rules[%d] (line %d) server=%s tools=%s action=deny", n, mcpRuleLine(m.policy, n), host, tools)
}

func startMCPRemote(t *testing.T) *mcpRemote {
	modules := mcpNodeModules(t)
	m := &mcpRemote{modules: modules}
	ca := newTestCA(t, "tests upstream CA")
	ev := mcpEverything(modules)
	jsPath := filepath.Join(t.TempDir(), "json-server.cjs")
	if err := os.WriteFile(jsPath, []byte(mcpJSONServerJS), 0o644); err != nil {
		t.Fatal(err)
	}
	var pEv, pJS, pSSE int
	pEv, m.everything = mcpFront(t, ca, startNode(t, modules, ev, "streamableHttp"), "mcp.test")
	pJS, m.js = mcpFront(t, ca, startNode(t, modules, jsPath), "json.test")
	pSSE, m.sse = mcpFront(t, ca, startNode(t, modules, ev, "sse"), "sse.test")
	m.policy = fmt.Sprintf(`
[network]
allow = ["mcp.test", "json.test", "sse.test"]

[upstream]
resolve = { "mcp.test" = "127.0.0.1:%d", "json.test" = "127.0.0.1:%d", "sse.test" = "127.0.0.1:%d" }
ca_files = [%q]

[[mcp.rules]]
server = "mcp.test"
tools = ["get-env"]
action = "deny"

[[mcp.rules]]
server = "json.test"
tools = ["get-*"]
action = "deny"

[[mcp.rules]]
server = "sse.test"
tools = ["get-env"]
action = "deny"
`, pEv, pJS, pSSE, ca.pemPath)
	m.env = startEnv(t, m.policy, envOptions{})
	return m
}

// mcpRemoteSteps lists the tools, calls echo and calls the denied get-env.
var mcpRemoteSteps = []mcpStep{
	{Op: "list"},
	{Op: "call", Name: "echo", Args: map[string]any{"message": "capsem-mcp-hello"}},
	{Op: "call", Name: "get-env"},
}

// checkRemoteClient asserts what the SDK client got from mcpRemoteSteps.
func checkRemoteClient(t *testing.T, what string, got []mcpStepResult, rule string) {
	t.Helper()
	if !got[0].OK || !slices.Contains(got[0].Tools, "echo") || slices.Contains(got[0].Tools, "get-env") {
		t.Errorf("%s: tools/list %+v; want echo listed and the denied get-env left out (hide_denied is the default)", what, got[0])
	}
	if !got[1].OK || got[1].IsError || got[1].Text != "Echo: capsem-mcp-hello" {
		t.Errorf("%s: echo %+v", what, got[1])
	}
	checkDenied(t, what, got[2], rule, "get-env")
}

func TestMCPRemoteStreamableHTTPThroughTheMITM(t *testing.T) {
	m := startMCPRemote(t)
	checkRemoteClient(t, "mcp.test (event-stream responses)", m.mcpClient(m.modules, "https://mcp.test/mcp", "streamable", mcpRemoteSteps...), m.rule("mcp.test"))
	checkRemoteClient(t, "json.test (JSON responses)", m.mcpClient(m.modules, "https://json.test/mcp", "streamable", mcpRemoteSteps...), m.rule("json.test"))

	// The upstreams: the echo call arrived, answered in the form each
	// server speaks; the denied call never did.
	for _, c := range []struct {
		host     string
		log      *mcpUpstreamLog
		respType string
	}{
		{"mcp.test", m.everything, "text/event-stream"},
		{"json.test", m.js, "application/json"},
	} {
		if echo := c.log.posts("capsem-mcp-hello"); len(echo) != 1 || !strings.HasPrefix(echo[0].respType, c.respType) {
			t.Errorf("%s: the upstream got %d echo calls (%+v), want 1 answered %s", c.host, len(echo), echo, c.respType)
		}
		if denied := c.log.posts(`"get-env"`); len(denied) != 0 {
			t.Errorf("%s: the denied tools/call reached the upstream: %s", c.host, denied[0].body)
		}
	}

	m.stop()
	rows := mcpRows(t, claudeExport(t, m.dataDir))
	logMCPRowsOnFailure(t, rows)
	for _, host := range []string{"mcp.test", "json.test"} {
		server := host + "/mcp"
		for _, meth := range []string{"initialize", "tools/list"} {
			r := findMCP(rows, server, meth, "")
			if len(r) != 1 || r[0].requestID == "" || r[0].durationMS <= 0 || r[0].respPreview == "" || r[0].decision != "allowed" {
				t.Errorf("want one allowed %s row on %s with its id, duration and response; mcp_calls:\n%s", meth, server, dumpMCPRows(rows))
			}
		}
		// The SDK sends notifications/initialized after initialize: a
		// notification, recorded without a request id.
		if n := findMCP(rows, server, "notifications/initialized", ""); len(n) != 1 || n[0].requestID != "" {
			t.Errorf("want one notifications/initialized row without a request id on %s; mcp_calls:\n%s", server, dumpMCPRows(rows))
		}
		checkAllowedCall(t, rows, server, "echo", "Echo: capsem-mcp-hello")
		checkDeniedRow(t, rows, server, "get-env", m.rule(host))
	}
}

func TestMCPRemoteHTTPAndSSETransportThroughTheMITM(t *testing.T) {
	m := startMCPRemote(t)
	checkRemoteClient(t, "sse.test (HTTP+SSE)", m.mcpClient(m.modules, "https://sse.test/sse", "sse", mcpRemoteSteps...), m.rule("sse.test"))
	if echo := m.sse.posts("capsem-mcp-hello"); len(echo) != 1 || echo[0].path != "/message" {
		t.Errorf("sse.test: the upstream got %d echo posts (%+v), want 1 to /message", len(echo), echo)
	}
	if denied := m.sse.posts(`"get-env"`); len(denied) != 0 {
		t.Errorf("sse.test: the denied tools/call reached the upstream: %s", denied[0].body)
	}

	m.stop()
	rows := mcpRows(t, claudeExport(t, m.dataDir))
	logMCPRowsOnFailure(t, rows)
	// The client posts to /message?sessionId=…; the responses come on the
	// GET /sse stream and are matched to their requests.
	const server = "sse.test/message"
	checkAllowedCall(t, rows, server, "echo", "Echo: capsem-mcp-hello")
	checkDeniedRow(t, rows, server, "get-env", m.rule("sse.test"))
	if r := findMCP(rows, server, "tools/list", ""); len(r) != 1 || !strings.Contains(r[0].respPreview, "echo") {
		t.Errorf("want one tools/list row on %s with its response from the GET stream; mcp_calls:\n%s", server, dumpMCPRows(rows))
	}
}

// mcpBatchPy speaks streamable HTTP to json.test by hand, as the SDK
// client does not batch: initialize (protocol 2025-03-26, the version that
// has batches), then two batches of tools/calls, one all allowed, one with
// a denied call. It prints each batch's status, Content-Type and body.
const mcpBatchPy = `
import http.client, json, os, ssl
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
c = http.client.HTTPSConnection("json.test", context=ctx, timeout=20)
sid = None
def post(body):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if sid:
        h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = sid, "2025-03-26"
    c.request("POST", "/mcp", body=json.dumps(body), headers=h)
    r = c.getresponse()
    return r, r.read()
r, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "capsem-batch", "version": "1"}}})
sid = r.getheader("Mcp-Session-Id")
post({"jsonrpc": "2.0", "method": "notifications/initialized"})
call = lambda i, name, args: {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}
out = {}
for key, batch in [("allowed", [call(10, "echo", {"message": "batch-a"}), call(11, "echo", {"message": "batch-b"})]),
                   ("mixed", [call(12, "echo", {"message": "batch-c"}), call(13, "get-env", {})])]:
    r, data = post(batch)
    out[key] = {"status": r.status, "type": r.getheader("Content-Type"), "body": json.loads(data)}
print(json.dumps(out))
`

func TestMCPRemoteHideDeniedOffAndBatches(t *testing.T) {
	m := startMCPRemote(t)
	// hide_denied = false, by a reload: tools/list shows the denied tool,
	// which is still refused, now by the rule at its new line.
	m.policy = strings.Replace(m.policy, "[[mcp.rules]]", "[mcp]\nhide_denied = false\n\n[[mcp.rules]]", 1)
	if err := os.WriteFile(m.policyPath, []byte(m.policy), 0o644); err != nil {
		t.Fatal(err)
	}
	m.signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(m.out.String(), "policy reloaded") }, "the reload")
	got := m.mcpClient(m.modules, "https://json.test/mcp", "streamable", mcpRemoteSteps...)
	if !got[0].OK || !slices.Contains(got[0].Tools, "echo") || !slices.Contains(got[0].Tools, "get-env") {
		t.Errorf("tools/list under hide_denied = false: %+v; want get-env listed", got[0])
	}
	checkDenied(t, "json.test, hide_denied = false", got[2], m.rule("json.test"), "get-env")

	// Batches: an allowed one is forwarded and each response recorded; one
	// holding a denied call is refused whole, never forwarded.
	out, err := m.runEnv(60*time.Second, m.trustEnv(), "python3", "-c", mcpBatchPy)
	var res map[string]struct {
		Status int
		Type   string
		Body   []struct {
			ID     int
			Result *struct{ Content []struct{ Text string } }
			Error  *struct {
				Code    int
				Message string
			}
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("the batch client: %v\n%s", err, out)
	}
	if a := res["allowed"]; a.Status != 200 || len(a.Body) != 2 || a.Body[0].Result == nil || a.Body[1].Result == nil {
		t.Errorf("the allowed batch got %+v; want 200 and both results", a)
	}
	mixed := res["mixed"]
	if mixed.Status != 200 || len(mixed.Body) != 2 {
		t.Fatalf("the batch with a denied call got %+v; want 200 and two errors", mixed)
	}
	for _, r := range mixed.Body {
		if r.Error == nil || r.Error.Code != -32050 || !strings.HasPrefix(r.Error.Message, "capsem:") {
			t.Errorf("the batch with a denied call: id %d got %+v; want capsem's JSON-RPC error", r.ID, r)
		}
	}
	if p := m.js.posts("batch-a"); len(p) != 1 {
		t.Errorf("the allowed batch reached the upstream %d times, want 1", len(p))
	}
	if p := m.js.posts("batch-c"); len(p) != 0 {
		t.Errorf("the batch with a denied call reached the upstream: %s", p[0].body)
	}

	m.stop()
	rows := mcpRows(t, claudeExport(t, m.dataDir))
	logMCPRowsOnFailure(t, rows)
	byID := map[string]mcpRow{}
	for _, r := range findMCP(rows, "json.test/mcp", "tools/call", "") {
		byID[r.requestID] = r
	}
	for _, c := range []struct {
		id, decision, resp, why string
	}{
		{"10", "allowed", "batch-a", "the first of an allowed batch, its response matched"},
		{"11", "allowed", "batch-b", "the second of an allowed batch, its response matched"},
		{"12", "denied", "capsem:", "an allowed call sent in one batch with a denied one is refused with it"},
		{"13", "denied", "capsem:", "the denied call"},
	} {
		r, ok := byID[c.id]
		if !ok || r.decision != c.decision || !strings.Contains(r.respPreview, c.resp) {
			t.Errorf("request id %s (%s): row %+v, want %s with %q in its response preview", c.id, c.why, r, c.decision, c.resp)
		}
	}
	if r := byID["13"]; r.rule != m.rule("json.test") || r.reason != "mcp-tool-denied" {
		t.Errorf("the denied batch call: rule %q reason %q, want %q mcp-tool-denied", r.rule, r.reason, m.rule("json.test"))
	}
}
