package tests

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/dlp"
)

// The session fixture: tests/fixtures/session.db is the SQLite
// export, scrubbed, of a real session — claude-code in the real guest
// against the fake api.anthropic.com, running a tool loop that creates,
// changes and deletes workspace files, is refused a direct IP, a name and
// a path, and calls a gateway MCP tool. The export's and the session
// viewer's tests read it; TestSessionFixture checks that it still holds
// every kind of row they rely on. `go tool task fixture:update` remakes it
// (TestSessionFixtureUpdate with fixtureUpdateEnv set).

// fixturePath is the committed fixture, from the tests directory.
const fixturePath = "fixtures/session.db"

// fixtureSealPub is the public half of the seal key of the session in
// fixturePath (ca.SealPubFile of the CA it was recorded with).
const fixtureSealPub = "fixtures/session-seal.pub"

// fixtureUpdateEnv set to 1 makes TestSessionFixtureUpdate write the
// fixture; otherwise it skips, so that the suite never rewrites a
// committed file.
const fixtureUpdateEnv = "CAPSEM_FIXTURE_UPDATE"

// fixtureMaxBytes is the bound on the committed file.
const fixtureMaxBytes = 2 << 20

// fixtureFake scripts the agent's tool loop: Bash creates files, then
// changes one and deletes another, then tries a direct IP, a name the
// policy does not allow and a denied path, then the gateway's echo tool.
func fixtureFake() *fakeAnthropic {
	bash := func(cmd, why string) fakeToolUse {
		return fakeToolUse{tool: "Bash", input: map[string]any{"command": cmd, "description": why}}
	}
	first := bash("mkdir -p src && printf 'draft\\n' > notes.md && printf 'package main\\n\\nfunc main() {}\\n' > src/main.go && printf 'scratch\\n' > scratch.txt && ls -R",
		"Create the project files")
	return &fakeAnthropic{
		tool:  first.tool,
		input: first.input,
		then: []fakeToolUse{
			bash("printf 'reviewed\\n' >> notes.md && rm scratch.txt && cat notes.md", "Update the notes, remove the scratch file"),
			bash("curl -sS -m 5 https://1.1.1.1/ ; curl -sS -m 5 https://example.com/ ; curl -sS -m 10 -o /dev/null -w 'admin: %{http_code}\\n' https://api.anthropic.com/admin/keys ; true",
				"Check which endpoints are reachable"),
			{tool: "mcp__tools__echo", input: map[string]any{"text": "fixture-mcp-echo"}},
		},
		final: "Done: notes.md and src/main.go are in place.",
	}
}

func TestSessionFixtureUpdate(t *testing.T) {
	if os.Getenv(fixtureUpdateEnv) != "1" {
		t.Skipf("remakes %s only with %s=1 (go tool task fixture:update)", fixturePath, fixtureUpdateEnv)
	}
	needGuest(t)
	ca := newTestCA(t, "tests upstream CA")
	fake := fixtureFake()
	port := startHTTPS(t, ca, fake, "api.anthropic.com")
	dir := t.TempDir()
	pol := fixturePolicy(t, dir, port, ca.pemPath)
	data := filepath.Join(dir, "data")
	script := `set -e
export HOME=/tmp/claude-home
mkdir -p "$HOME"
cd /workspace
claude mcp add --transport http tools https://mcp.capsem.internal/tools
claude -p "Set up the project, check the endpoints, then echo through the tools server." --allowedTools Bash,mcp__tools__echo`
	start := time.Now()
	r := capsemRun(t, runOpts{policy: pol, data: data}, claudeGuestMCPFlags(), "sh", "-c", script)
	t.Logf("capsem run took %v\nstdout:\n%s\nthe fake API saw:\n%s", time.Since(start).Round(time.Millisecond), r.stdout, fake.log())
	if r.code != 0 || !strings.Contains(r.stdout, fake.final) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	out := filepath.Join(dir, "session.db")
	if b, err := exec.Command(capsemBin, "export", "--sqlite", out, "--data", data, "--session", r.session, "--scrub").CombinedOutput(); err != nil {
		t.Fatalf("capsem export: %v\n%s", err, b)
	}
	db, err := sql.Open("sqlite", out)
	if err != nil {
		t.Fatal(err)
	}
	// VACUUM: the export's pages freed by its own index builds are not
	// worth committing.
	_, err = db.Exec(`VACUUM`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkSessionFixture(t, out, filepath.Join(sharedCADir, "seal.pub"))
	if t.Failed() {
		t.Fatalf("the new fixture lacks what the tests need; %s is unchanged", fixturePath)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(fixturePath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixturePath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The key that sealed it: `capsem inspect --key` trusts it.
	pub, err := os.ReadFile(filepath.Join(sharedCADir, "seal.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixtureSealPub, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d bytes, session %s", fixturePath, len(b), r.session)
}

// TestSessionFixture checks the committed fixture: the export's and the
// viewer's tests rely on each kind of row being there.
func TestSessionFixture(t *testing.T) {
	if _, err := os.Stat(fixturePath); err != nil {
		t.Fatalf("%s: %v (go tool task fixture:update makes it)", fixturePath, err)
	}
	checkSessionFixture(t, fixturePath, fixtureSealPub)
}

// checkSessionFixture checks that the fixture at path holds every kind of
// record the export's and the viewer's tests read, passes capsem inspect's checks, is small, and has no
// credential the DLP detectors know in any text cell.
func checkSessionFixture(t *testing.T, path, sealPub string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= fixtureMaxBytes {
		t.Errorf("%s is %d bytes, want under %d", path, st.Size(), fixtureMaxBytes)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct{ why, q string }{
		{"an allowed flow", `SELECT count(*) FROM net_events WHERE decision = 'allowed' AND method IS NULL`},
		{"a denied flow (the direct IP)", `SELECT count(*) FROM net_events WHERE decision = 'denied' AND reason = 'direct-ip'`},
		{"a denied request (the [[http]] rule)", `SELECT count(*) FROM net_events WHERE decision = 'denied' AND method IS NOT NULL AND status_code = 403`},
		{"a denied name", `SELECT count(*) FROM dns_events WHERE decision = 'denied'`},
		{"a created file", `SELECT count(*) FROM fs_events WHERE action = 'created'`},
		{"a modified file", `SELECT count(*) FROM fs_events WHERE action = 'modified'`},
		{"a deleted file", `SELECT count(*) FROM fs_events WHERE action = 'deleted'`},
		{"a model call with a cost", `SELECT count(*) FROM model_calls WHERE estimated_cost_usd > 0`},
		{"tool calls with their origin", `SELECT count(*) FROM tool_calls WHERE origin IS NOT NULL AND origin != ''`},
		{"a tool call answered by a tool response", `SELECT count(*) FROM tool_calls c JOIN tool_responses r ON r.session_id = c.session_id AND r.call_id = c.call_id`},
		{"an MCP tool call", `SELECT count(*) FROM mcp_calls WHERE method = 'tools/call' AND decision = 'allowed'`},
		{"an MCP tool call linked to the model's tool call", `SELECT count(*) FROM tool_calls WHERE mcp_call_id IS NOT NULL`},
		{"exec events", `SELECT count(*) FROM exec_events`},
	} {
		var n int
		if err := db.QueryRow(c.q).Scan(&n); err != nil {
			t.Errorf("%s: %v", c.why, err)
		} else if n == 0 {
			t.Errorf("the fixture has no %s (%s)", c.why, c.q)
		}
	}
	if b, err := exec.Command(capsemBin, "inspect", "--sqlite", path, "--key", sealPub).CombinedOutput(); err != nil {
		t.Errorf("capsem inspect --sqlite %s: %v\n%s", path, err, b)
	}
	checkNoCredentials(t, db)
}

// checkNoCredentials fails t if any text cell of any table has a credential
// the DLP detectors find: scrubbing it changes it.
func checkNoCredentials(t *testing.T, db *sql.DB) {
	t.Helper()
	tables := queryStrings(t, db, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				var s string
				switch v := v.(type) {
				case string:
					s = v
				case []byte:
					s = string(v)
				default:
					continue
				}
				if dlp.Scrub(s) != s {
					t.Errorf("%s.%s holds a credential: %.120q", table, cols[i], s)
				}
			}
		}
		rows.Close()
	}
}

// fixturePolicy writes the policy the fixture's session runs under into
// dir: api.anthropic.com (to the upstream on port, trusted through
// caPath), its /admin/ refused, and the gateway's test server "tools".
// policy suggest learns from the fixture against it.
func fixturePolicy(t *testing.T, dir string, port int, caPath string) string {
	t.Helper()
	pol := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(pol, []byte(fmt.Sprintf(`# the session fixture's policy
[network]
default = "deny"
allow = ["api.anthropic.com:443"]

[upstream]
resolve = { "api.anthropic.com" = "127.0.0.1:%d" }
ca_files = [%q]

[[http]]
host = "api.anthropic.com"
paths = ["/admin/*"]
action = "deny"

[mcp.servers.tools]
command = [%q, "mcp-test-server"]
`, port, caPath, capsemBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	return pol
}
