package tests

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// claudeCodeVersion is the @anthropic-ai/claude-code release the tests run:
// the newest at the time of pinning. Since 2.1.113 the package installs a
// native executable (its postinstall, install.cjs, links the platform
// package's binary, e.g. @anthropic-ai/claude-code-linux-x64, over
// bin/claude.exe), so its engines field (node >= 22 since 2.1.198) only
// makes npm warn: node runs just the postinstall. CI installs it with
// claudeCodeInstall (Taskfile.yml deps:npm pins the same version).
const claudeCodeVersion = "2.1.330"

const claudeCodeInstall = "npm install --prefix .cache/npm @anthropic-ai/claude-code@" + claudeCodeVersion + " --save-exact --no-audit --no-fund"

// claudeCode returns the pinned claude-code executable under the repo's
// .cache/npm, or skips the test when it is not installed there.
func claudeCode(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../.cache/npm/node_modules/.bin/claude")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("claude-code %s is not installed under .cache/npm (CI installs it; run `go tool task deps:npm` or `%s` at the repo root)", claudeCodeVersion, claudeCodeInstall)
	}
	cmd := exec.Command(bin, "--version")
	cmd.Env = claudeEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s(if postinstall did not run: `node .cache/npm/node_modules/@anthropic-ai/claude-code/install.cjs`)", bin, err, out)
	}
	if !strings.HasPrefix(string(out), claudeCodeVersion+" ") {
		t.Skipf("claude-code under .cache/npm is %q, the tests pin %s (run `%s`)", strings.TrimSpace(string(out)), claudeCodeVersion, claudeCodeInstall)
	}
	return bin
}

// claudeEnv is the whole environment claude-code runs with: nothing of the
// caller's (no real API key, base URL or proxy leaks in), a fresh HOME, and
// every kind of traffic but the API calls turned off.
func claudeEnv(home string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TERM=dumb",
		"LANG=C.UTF-8",
		"ANTHROPIC_API_KEY=sk-ant-api03-capsem-test-key-not-a-secret",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	}, extra...)
}

const (
	claudeMarker = "capsem-tool-ran"
	claudeFinal  = "capsem-final-answer."
)

// newClaudeFake is the fake API for the claude-code tests: it has claude
// run Bash (allowed with --allowedTools Bash), which prints a marker and
// writes it to a file in the working directory.
func newClaudeFake() *fakeAnthropic {
	return &fakeAnthropic{
		tool:  "Bash",
		input: map[string]any{"command": "echo " + claudeMarker + " | tee capsem-marker.txt", "description": "Print the capsem marker"},
		final: claudeFinal,
	}
}

// runClaude runs `claude -p` in dir with env; ns runs it in the namespace
// when set. It returns claude's output and how long it took.
func runClaude(t *testing.T, ns func(ctx context.Context, name string, args ...string) *exec.Cmd, bin, dir string, env []string) (string, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	args := []string{"-p", "Run the capsem marker command.", "--allowedTools", "Bash"}
	var cmd *exec.Cmd
	if ns != nil {
		cmd = ns(ctx, bin, args...)
	} else {
		cmd = exec.CommandContext(ctx, bin, args...)
	}
	var out bytes.Buffer
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	return out.String(), time.Since(start), err
}

// checkClaudeRan checks that claude printed the final answer, which quotes
// the tool's output, and that the tool wrote its file.
func checkClaudeRan(t *testing.T, fake *fakeAnthropic, out, dir string, err error) {
	t.Helper()
	if err != nil || !strings.Contains(out, claudeFinal+" The tool said: "+claudeMarker) {
		t.Fatalf("claude: %v\n%s\nrequests the fake API saw:\n%s", err, out, fake.log())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "capsem-marker.txt")); err != nil || strings.TrimSpace(string(b)) != claudeMarker {
		t.Errorf("the Bash tool did not write its marker: %q %v", b, err)
	}
}

// TestClaudeCodeAgainstTheFakeDirectly runs claude-code on the host against
// the fake API over TLS (ANTHROPIC_BASE_URL, the test CA trusted through
// NODE_EXTRA_CA_CERTS), without capsem: when the capsem test below fails,
// this one tells whether claude-code and the fake still get along.
func TestClaudeCodeAgainstTheFakeDirectly(t *testing.T) {
	bin := claudeCode(t)
	ca := newTestCA(t, "tests upstream CA")
	fake := newClaudeFake()
	port := startHTTPS(t, ca, fake, "localhost")
	dir := t.TempDir()
	out, took, err := runClaude(t, nil, bin, dir, claudeEnv(t.TempDir(),
		fmt.Sprintf("ANTHROPIC_BASE_URL=https://localhost:%d", port),
		"NODE_EXTRA_CA_CERTS="+ca.pemPath))
	t.Logf("claude took %v; the fake API saw:\n%s", took, fake.log())
	checkClaudeRan(t, fake, out, dir, err)
}

// TestClaudeCodeToolLoopIsRecorded runs the real claude-code CLI in the
// guest namespace against the default API host, api.anthropic.com, which
// capsem's fake DNS answers and its MITM intercepts; [upstream] resolve
// sends it to the fake API on host loopback. The fake answers the first
// call with a tool_use of Bash and the call carrying the tool_result with a
// final message. The export must show both model calls, the tool call
// linked to the call that made it and the tool response linked to the call
// that sent it back, in one trace.
func TestClaudeCodeToolLoopIsRecorded(t *testing.T) {
	bin := claudeCode(t)
	needHarness(t)
	ca := newTestCA(t, "tests upstream CA")
	fake := newClaudeFake()
	port := startHTTPS(t, ca, fake, "api.anthropic.com")
	e := startEnv(t, fmt.Sprintf(`
[network]
default = "deny"
allow = ["api.anthropic.com:443"]

[upstream]
resolve = { "api.anthropic.com" = "127.0.0.1:%d" }
ca_files = [%q]
`, port, ca.pemPath), envOptions{})

	dir := t.TempDir()
	out, took, err := runClaude(t, e.ns.Command, bin, dir, claudeEnv(t.TempDir(), e.trustEnv()...))
	t.Logf("claude in the namespace took %v; the fake API saw:\n%s", took, fake.log())
	checkClaudeRan(t, fake, out, dir, err)
	var toolUseID string
	for _, r := range fake.seen() {
		if r.Answer == "tool_use" {
			toolUseID = r.ToolUseID
		}
	}
	e.stop()

	db := claudeExport(t, e.dataDir)
	type modelCall struct {
		id, seq                 int64
		provider, domain, model string
		path, stopReason, trace string
		text                    string
		stream, status, tools   int64
		in, out                 int64
	}
	rows, err := db.Query(`SELECT id, seq, coalesce(provider, ''), coalesce(domain, ''), coalesce(model, ''), coalesce(path, ''),
		coalesce(stop_reason, ''), coalesce(trace_id, ''), coalesce(text_content, ''), coalesce(stream, -1), coalesce(status_code, 0), coalesce(tools_count, 0),
		input_tokens, output_tokens FROM model_calls ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[int64]modelCall{}
	var dump strings.Builder
	for rows.Next() {
		var m modelCall
		if err := rows.Scan(&m.id, &m.seq, &m.provider, &m.domain, &m.model, &m.path, &m.stopReason, &m.trace,
			&m.text, &m.stream, &m.status, &m.tools, &m.in, &m.out); err != nil {
			t.Fatal(err)
		}
		calls[m.id] = m
		fmt.Fprintf(&dump, "  %+v\n", m)
	}
	rows.Close()
	t.Logf("model_calls:\n%s", dump.String())
	good := 0
	for _, m := range calls {
		if m.provider == "anthropic" && m.domain == "api.anthropic.com" && m.model != "" && m.path == "/v1/messages" &&
			m.stream == 1 && m.status == 200 && m.tools > 0 && m.in > 0 && m.out > 0 {
			good++
		}
	}
	if good < 2 {
		t.Fatalf("%d model_calls rows of anthropic on api.anthropic.com with model, stream, tools and tokens; want at least 2\n%s", good, dump.String())
	}

	// The tool call, linked to the call whose response made it.
	var tcModel int64
	var tcID, tcName, tcArgs string
	err = db.QueryRow(`SELECT coalesce(model_call_id, 0), coalesce(call_id, ''), coalesce(tool_name, ''), coalesce(arguments, '')
		FROM tool_calls`).Scan(&tcModel, &tcID, &tcName, &tcArgs)
	if err != nil {
		t.Fatalf("want one tool_calls row: %v (rows: %d)", err, tableRows(t, db, "tool_calls"))
	}
	if n := tableRows(t, db, "tool_calls"); n != 1 {
		t.Errorf("%d tool_calls rows, want 1", n)
	}
	if tcID != toolUseID || tcName != "Bash" {
		t.Errorf("tool call %q %q, want %q Bash", tcID, tcName, toolUseID)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(tcArgs), &args); err != nil || args["command"] != fake.input["command"] {
		t.Errorf("tool call arguments %q (%v), want the JSON the fake streamed, command %q", tcArgs, err, fake.input["command"])
	}
	asker, ok := calls[tcModel]
	if !ok || asker.stopReason != "tool_use" {
		t.Errorf("tool call linked to model call %d (%+v), want the call that stopped for tool_use", tcModel, asker)
	}

	// The tool response, linked to the later call that sent it back.
	var trModel, isErr int64
	var preview string
	err = db.QueryRow(`SELECT coalesce(model_call_id, 0), coalesce(content_preview, ''), coalesce(is_error, -1)
		FROM tool_responses WHERE call_id = ?`, tcID).Scan(&trModel, &preview, &isErr)
	if err != nil {
		t.Fatalf("no tool_responses row for call_id %q: %v (rows: %d)", tcID, err, tableRows(t, db, "tool_responses"))
	}
	answerer, ok := calls[trModel]
	if !ok || answerer.seq <= asker.seq || answerer.stopReason != "end_turn" {
		t.Errorf("tool response linked to model call %d (%+v), want the later call that ended the turn", trModel, answerer)
	}
	if !strings.Contains(answerer.text, claudeFinal) {
		t.Errorf("the final call's text_content %q lacks the final answer", answerer.text)
	}
	t.Logf("tool_calls: model_call_id=%d call_id=%s tool_name=%s arguments=%s", tcModel, tcID, tcName, tcArgs)
	t.Logf("tool_responses: model_call_id=%d call_id=%s is_error=%d content_preview=%q", trModel, tcID, isErr, preview)
	if !strings.Contains(preview, claudeMarker) || isErr != 0 {
		t.Errorf("tool response preview %q is_error %d, want the tool's output and 0", preview, isErr)
	}
	if asker.trace == "" || asker.trace != answerer.trace {
		t.Errorf("trace ids %q and %q: the two calls of the tool loop should share one", asker.trace, answerer.trace)
	}
}

// claudeExport exports the session in dataDir with `capsem export --sqlite`
// and opens the file.
func claudeExport(t *testing.T, dataDir string) *sql.DB {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run.db")
	cmd := exec.Command(capsemBin, "export", "--sqlite", out, "--data", dataDir, "--all")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "exported 1 session(s)") {
		t.Fatalf("capsem export: %v\n%s", err, b)
	}
	db, err := sql.Open("sqlite", out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func tableRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
