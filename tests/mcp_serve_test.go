package tests

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/image"
)

// mcpServeOut is what mcpClientJS printed.
type mcpServeOut struct {
	ConnectError string          `json:"connectError"`
	Instructions string          `json:"instructions"`
	Steps        []mcpStepResult `json:"steps"`
}

// mcpServeClient runs the TypeScript SDK client on the host with plan:
// {transport: "stdio", command, args, env} or {transport: "http", url,
// token}.
func mcpServeClient(t *testing.T, modules string, plan map[string]any, steps ...mcpStep) mcpServeOut {
	t.Helper()
	script := filepath.Join(t.TempDir(), "mcp-client.cjs")
	if err := os.WriteFile(script, []byte(mcpClientJS), 0o644); err != nil {
		t.Fatal(err)
	}
	plan["steps"] = steps
	raw, _ := json.Marshal(plan)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, string(raw))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("the MCP client: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr.String())
	}
	var out mcpServeOut
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil || (out.ConnectError == "" && len(out.Steps) != len(steps)) {
		t.Fatalf("the MCP client printed (%v, %d steps of %d):\n%.4000s\nstderr:\n%.4000s", err, len(out.Steps), len(steps), stdout, stderr.String())
	}
	t.Logf("capsem mcp serve's stderr:\n%s", stderr.String())
	return out
}

func call(name string, args map[string]any) mcpStep {
	return mcpStep{Op: "call", Name: name, Args: args}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestMCPServeTypeScriptClient: capsem mcp serve as an MCP host runs it (a
// stdio child), driven by the official TypeScript SDK client through every
// tool against a real sandbox: a command's output and code, the caps said
// so, a timeout, files both ways, what the policy refused listed first, the
// prefix and the stop.
func TestMCPServeTypeScriptClient(t *testing.T) {
	e := newSBEnv(t)
	modules := mcpNodeModules(t)
	const name = "mcp-ts"
	bytes256 := make([]byte, 256)
	for i := range bytes256 {
		bytes256[i] = byte(i)
	}
	const real = "sk-ant-api03-mcp-serve-real-value-0123456789"
	out := mcpServeClient(t, modules, map[string]any{"transport": "stdio", "command": capsemBin,
		"args": []string{"mcp", "serve", "--data", e.data, "--ca-dir", e.caDir, "--allow-create", "--workspace", e.ws,
			"--max-output", "1000", "--max-file", "100000", "--secret", "ANTHROPIC_API_KEY"},
		"env": map[string]string{"ANTHROPIC_API_KEY": real}},
		mcpStep{Op: "list"},
		call("sandbox_start", map[string]any{"name": name, "secrets": []string{"ANTHROPIC_API_KEY"}}),
		call("sandbox_exec", map[string]any{"name": name, "command": "echo hi; echo err >&2; exit 3"}),
		call("sandbox_exec", map[string]any{"name": name, "command": "head -c 5000 /dev/zero | tr '\\0' a"}),
		call("sandbox_exec", map[string]any{"name": name, "command": "echo started; sleep 60", "timeout_s": 1}),
		call("sandbox_exec", map[string]any{"name": name, "command": "cat", "stdin": "from the model"}),
		call("sandbox_write_file", map[string]any{"name": name, "path": "/root/note.txt", "content": "hello from MCP\n"}),
		call("sandbox_read_file", map[string]any{"name": name, "path": "/root/note.txt"}),
		call("sandbox_write_file", map[string]any{"name": name, "path": "bin.dat", "content": b64(bytes256), "base64": true}),
		call("sandbox_read_file", map[string]any{"name": name, "path": "/workspace/bin.dat"}),
		call("sandbox_exec", map[string]any{"name": name, "command": "curl -sS --max-time 10 https://denied.example/ 2>&1; echo curl=$?"}),
		call("sandbox_events", map[string]any{"name": name, "limit": 5}),
		call("sandbox_start", map[string]any{"name": "dev"}),
		call("sandbox_ls", map[string]any{}),
		call("sandbox_stop", map[string]any{"name": name}),
		call("sandbox_exec", map[string]any{"name": name, "command": "true"}),
		call("sandbox_rm", map[string]any{"name": name}),
		call("sandbox_start", map[string]any{"name": name, "secrets": []string{"GH_TOKEN"}}),
		call("sandbox_start", map[string]any{"name": name}),
		call("sandbox_exec", map[string]any{"name": name, "command": "head -c 150000 /dev/zero | tr '\\0' b > /root/big"}),
		call("sandbox_read_file", map[string]any{"name": name, "path": "/root/big"}),
		call("sandbox_exec", map[string]any{"name": name, "command": "echo $ANTHROPIC_API_KEY; cat /proc/[0-9]*/environ | tr '\\0' '\\n' | grep -c capsem-secret-"}),
		call("sandbox_rm", map[string]any{"name": name}),
	)
	if out.ConnectError != "" {
		t.Fatalf("connect: %s", out.ConnectError)
	}
	s := out.Steps
	for i, st := range s {
		if !st.OK {
			t.Errorf("step %d: the SDK rejected: %s", i, st.Message)
		}
	}
	if got := strings.Join(s[0].Tools, ","); got != "sandbox_events,sandbox_exec,sandbox_ls,sandbox_read_file,sandbox_rm,sandbox_start,sandbox_stop,sandbox_write_file" {
		t.Errorf("tools: %s", got)
	}
	if !strings.Contains(out.Instructions, `start with "mcp-"`) {
		t.Errorf("instructions: %q", out.Instructions)
	}
	if s[1].IsError || !strings.Contains(s[1].Text, "created") {
		t.Fatalf("sandbox_start: %+v", s[1])
	}
	if st := s[2]; st.IsError || st.Text != "hi\n[stderr]\nerr\n[exit code 3]" || st.Structured["exit_code"] != float64(3) {
		t.Errorf("exec: %+v", st)
	}
	if st := s[3]; !strings.Contains(st.Text, "[exit code 0; capsem: stdout cut: the first 1000 of 5000 bytes shown]") ||
		st.Structured["note"] != "stdout cut: the first 1000 of 5000 bytes shown" ||
		st.Structured["truncated"] != true || st.Structured["stdout_bytes"] != float64(5000) || len(st.Structured["stdout"].(string)) != 1000 {
		t.Errorf("exec over the cap: %q %v", st.Text, st.Structured)
	}
	if st := s[4]; st.Structured["exit_code"] != float64(124) || st.Structured["timed_out"] != true || !strings.Contains(st.Text, "started\n[exit code 124; capsem: timed out after 1s]") {
		t.Errorf("exec timeout: %+v", st)
	}
	if st := s[5]; st.Text != "from the model\n[exit code 0]" {
		t.Errorf("exec stdin: %q", st.Text)
	}
	if st := s[7]; st.IsError || st.Text != "hello from MCP\n" || st.Structured["encoding"] != "utf-8" {
		t.Errorf("read text: %+v", st)
	}
	if st := s[9]; st.IsError || st.Structured["encoding"] != "base64" || st.Structured["content"] != b64(bytes256) {
		t.Errorf("read binary: %+v", st)
	}
	if st := s[10]; !strings.Contains(st.Text, "curl=") || strings.Contains(st.Text, "curl=0") {
		t.Errorf("curl to a denied name succeeded: %q", st.Text)
	}
	ev := s[11]
	evs, _ := ev.Structured["events"].([]any)
	if ev.IsError || len(evs) == 0 || ev.Structured["denied"].(float64) < 1 {
		t.Fatalf("events: %+v", ev)
	}
	first, _ := evs[0].(map[string]any)
	if first["decision"] != "denied" || !strings.Contains(fmt.Sprint(first), "denied.example") {
		t.Errorf("events: the first is not the denied lookup: %v\n%s", first, ev.Text)
	}
	if st := s[12]; !st.IsError || !strings.Contains(st.Text, `try "mcp-dev"`) {
		t.Errorf("a name outside the prefix: %+v", st)
	}
	if st := s[13]; !strings.Contains(st.Text, name+"\trunning") {
		t.Errorf("ls: %q", st.Text)
	}
	if st := s[14]; st.IsError {
		t.Errorf("stop: %+v", st)
	}
	if st := s[15]; !st.IsError || !strings.Contains(st.Text, "not running: sandbox_start starts it") {
		t.Errorf("exec in a stopped sandbox: %+v", st)
	}
	if st := s[16]; st.IsError {
		t.Errorf("rm: %+v", st)
	}
	if st := s[17]; !st.IsError || !strings.Contains(st.Text, `secret "GH_TOKEN" is not one this server offers (it offers ANTHROPIC_API_KEY)`) {
		t.Errorf("a secret not offered: %+v", st)
	}
	if st := s[21]; st.IsError || !strings.HasPrefix(st.Text, "capsem-secret-") || strings.Contains(st.Text, real) {
		t.Errorf("the secret in the sandbox: %q", st.Text)
	}
	if st := s[20]; st.IsError || st.Structured["truncated"] != true || st.Structured["bytes"] != float64(100000) ||
		!strings.HasSuffix(st.Text, "[capsem: /root/big is longer than this server's limit: its first 100000 bytes are shown]") {
		t.Errorf("read over the cap: %v", st.Structured["note"])
	}
	if _, err := os.Stat(filepath.Join(e.data, "sandboxes", name)); !os.IsNotExist(err) {
		t.Errorf("the sandbox's directory is still there after sandbox_rm: %v", err)
	}
}

// TestMCPServeHTTPToken: over streamable HTTP the server answers only the
// bearer token it was given; the client with it gets the tools.
func TestMCPServeHTTPToken(t *testing.T) {
	needGuest(t)
	modules := mcpNodeModules(t)
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, capsemBin, "mcp", "serve", "--data", data, "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "CAPSEM_MCP_TOKEN=tok-"+t.Name())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+/) \(Authorization: Bearer \$CAPSEM_MCP_TOKEN\)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("capsem mcp serve --http said %q (%v)", line, err)
	}
	bad := mcpServeClient(t, modules, map[string]any{"transport": "http", "url": m[1], "token": "wrong"}, mcpStep{Op: "list"})
	if !strings.Contains(bad.ConnectError, "a bearer token is required") {
		t.Errorf("a wrong token: %+v", bad)
	}
	good := mcpServeClient(t, modules, map[string]any{"transport": "http", "url": m[1], "token": "tok-" + t.Name()},
		mcpStep{Op: "list"}, call("sandbox_ls", map[string]any{}), call("sandbox_start", map[string]any{"name": "mcp-x"}))
	if good.ConnectError != "" || len(good.Steps[0].Tools) != 8 || !strings.Contains(good.Steps[1].Text, "no sandboxes") {
		t.Fatalf("the token: %+v", good)
	}
	if st := good.Steps[2]; !st.IsError || !strings.Contains(st.Text, "may not create") {
		t.Errorf("without --allow-create: %+v", st)
	}
}

// TestMCPServeClaude: the real claude CLI with capsem added the way its
// users add it (claude mcp add capsem -- capsem mcp serve …), against the
// fake api.anthropic.com: the model's tool calls start a sandbox and run a
// command in it, and the command's output reaches the model.
func TestMCPServeClaude(t *testing.T) {
	e := newSBEnv(t)
	bin := claudeCode(t)
	ca := newTestCA(t, "tests upstream CA")
	const name = "mcp-claude"
	fake := &fakeAnthropic{
		tool:  "mcp__capsem__sandbox_start",
		input: map[string]any{"name": name},
		then: []fakeToolUse{{tool: "mcp__capsem__sandbox_exec",
			input: map[string]any{"name": name, "command": "echo capsem-mcp-$((6*7)) from $(uname -s)"}}},
		final: claudeFinal,
	}
	port := startHTTPS(t, ca, fake, "localhost")
	home, dir := t.TempDir(), t.TempDir()
	env := claudeEnv(home, fmt.Sprintf("ANTHROPIC_BASE_URL=https://localhost:%d", port), "NODE_EXTRA_CA_CERTS="+ca.pemPath,
		"ENABLE_TOOL_SEARCH=false", "MCP_CONNECTION_NONBLOCKING=0", "MCP_TOOL_TIMEOUT=600000")
	// claude runs the server with its own environment, here a HOME of the
	// test's: the guest images stay in the cache the other tests built.
	cache, err := image.DefaultCacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	add := exec.Command(bin, "mcp", "add", "capsem", "-e", "XDG_CACHE_HOME="+filepath.Dir(cache), "--", capsemBin, "mcp", "serve",
		"--data", e.data, "--ca-dir", e.caDir, "--allow-create", "--workspace", e.ws)
	add.Dir, add.Env = dir, env
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("claude mcp add: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", "Start a capsem sandbox and run the marker command in it.",
		"--allowedTools", "mcp__capsem__sandbox_start,mcp__capsem__sandbox_exec")
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("the fake API saw:\n%s", fake.log())
	// claude hands the model a tool's structured content when there is one
	// (here, sandbox_exec's result as JSON): the output is in it.
	if err != nil || !strings.Contains(string(out), claudeFinal+" The tool said: ") || !strings.Contains(string(out), "capsem-mcp-42 from Linux") {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	// The sandbox claude started runs on.
	e.must(0, nil, "exec", name, "--", "true")
}
