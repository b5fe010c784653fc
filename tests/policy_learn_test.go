package tests

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// capsemOut runs the capsem binary and returns its stdout, stderr and
// exit code.
func capsemOut(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(capsemBin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// The real session fixture (claude through capsem, with the MCP gateway)
// learned from: the suggestion reproduces every decision of the session
// (policy check: no change) and allows strictly less than the policy the
// session ran under.
func TestPolicySuggestFixture(t *testing.T) {
	ca := newTestCA(t, "learn CA")
	dir := t.TempDir()
	base := fixturePolicy(t, dir, 4443, ca.pemPath)
	id := fixtureSessionID(t)
	sugg := filepath.Join(dir, "suggested.toml")
	_, stderr, code := capsemOut(t, "policy", "suggest", "--sqlite", fixturePath, "--base", base, "-o", sugg, id)
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("policy suggest: exit %d\n%s", code, stderr)
	}
	text, _ := os.ReadFile(sugg)
	t.Logf("the suggestion:\n%s", text)
	if out, stderr, code := capsemOut(t, "policy", "check", "--sqlite", fixturePath, sugg, id); code != 0 || !strings.Contains(stderr, "no decision") {
		t.Errorf("policy check of the session against its suggestion: exit %d\n%s%s", code, out, stderr)
	}
	b, err := policy.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	s, err := policy.Load(sugg)
	if err != nil {
		t.Fatal(err)
	}
	// Strictly smaller: everything the suggestion allows the base does,
	// and the base allows more.
	type probe struct {
		what    string
		decided func(*policy.Policy) bool
	}
	var probes []probe
	for _, n := range []string{"api.anthropic.com", "mcp.capsem.internal", "example.com", "statsig.anthropic.com"} {
		probes = append(probes, probe{"dns " + n, func(p *policy.Policy) bool { return p.DecideName(n).Allowed }})
		for _, port := range []uint16{443, 80, 8080} {
			probes = append(probes, probe{fmt.Sprintf("flow %s:%d", n, port), func(p *policy.Policy) bool { return p.DecideFlow(n, port).Allowed }})
		}
	}
	for _, r := range [][2]string{{"POST", "/v1/messages"}, {"GET", "/v1/models"}, {"GET", "/api/claude_code/settings"}, {"DELETE", "/api/claude_code/settings"}, {"GET", "/admin/keys"}, {"POST", "/v1/files"}} {
		probes = append(probes, probe{"request " + r[0] + " " + r[1], func(p *policy.Policy) bool { return p.DecideHTTP("api.anthropic.com", r[0], r[1]).Allowed }})
	}
	for _, tool := range []string{"echo", "add", "delete_everything"} {
		probes = append(probes, probe{"mcp tools " + tool, func(p *policy.Policy) bool { return p.DecideMCPTool("tools", tool).Allowed }})
	}
	var narrower []string
	for _, pr := range probes {
		inBase, inSugg := pr.decided(b), pr.decided(s)
		if inSugg && !inBase {
			t.Errorf("%s: the suggestion allows what the session's policy did not", pr.what)
		}
		if inBase && !inSugg {
			narrower = append(narrower, pr.what)
		}
	}
	if len(narrower) == 0 {
		t.Error("the suggestion is not smaller than the session's policy")
	}
	t.Logf("allowed by the session's policy, not by the suggestion: %v", narrower)
	for _, want := range []string{"GET /v1/models", "mcp tools add"} {
		if !slices.ContainsFunc(narrower, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("the suggestion still allows %s, which the session never did", want)
		}
	}
}

// fixtureSessionID is the fixture's one session.
func fixtureSessionID(t *testing.T) string {
	t.Helper()
	db, err := sql.Open("sqlite", fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id string
	if err := db.QueryRow("SELECT id FROM sessions").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A hand-made session checked against a policy that decides six of its
// questions otherwise: check lists exactly those, with their events, and
// leaves out what no policy decided (an upstream that refused, a store
// that could not record).
func TestPolicyCheckHandMade(t *testing.T) {
	data := t.TempDir()
	st, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Begin(store.Session{Command: []string{"hand", "made"}})
	if err != nil {
		t.Fatal(err)
	}
	dns := func(name, reason string, d store.Decision) {
		w.Append(store.Event{DNS: &store.DNS{QName: name, QType: "A", Decision: d, Reason: reason}})
	}
	flow := func(name string, port uint16, reason string, d store.Decision) {
		w.Append(store.Event{Net: &store.Net{Transport: store.TransportTCP, ConnType: store.ConnTCP, Domain: name, Port: port, Decision: d, Reason: reason}})
	}
	req := func(method, path, reason string, d store.Decision) {
		w.Append(store.Event{Net: &store.Net{Transport: store.TransportTCP, ConnType: store.ConnHTTPS, Domain: "a.test", Port: 443, Method: method, Path: path, Decision: d, Reason: reason}})
	}
	call := func(tool, reason string, d store.Decision) {
		w.Append(store.Event{MCPCall: &store.MCPCall{ServerName: "srv.test/mcp", Method: "tools/call", ToolName: tool, Decision: d, Reason: reason}})
	}
	dns("a.test", "allowed-name", store.Allowed)
	dns("a.test", "allowed-name", store.Allowed)
	dns("b.test", "denied-name", store.Denied)
	dns("c.test", "store-unavailable", store.Denied) // no policy decided it
	flow("a.test", 443, "allowed", store.Allowed)
	flow("a.test", 8080, "port-not-allowed", store.Denied)
	flow("c.test", 443, "upstream-unreachable", store.Denied) // allowed by the policy, refused by the upstream
	req("GET", "/x", "allowed", store.Allowed)
	req("POST", "/admin", "http-denied", store.Denied)
	call("read", "allowed", store.Allowed)
	call("write", "mcp-tool-denied", store.Denied)
	code := 0
	if err := w.End(&code); err != nil {
		t.Fatal(err)
	}
	id := w.ID()
	st.Close()

	pol := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(pol, []byte(`
[network]
allow = ["a.test:8080", "b.test", "srv.test"]

[mcp]
unknown = "deny"

[[mcp.rules]]
server = "srv.test"
tools = ["write"]
action = "allow"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := capsemOut(t, "policy", "check", "--data", data, pol, id)
	if code != 1 {
		t.Errorf("exit %d, want 1 (something would change)\n%s", code, stderr)
	}
	want := []string{
		"denied -> allowed  dns b.test  (1 event; was denied-name; now allowed by b.test)",
		"allowed -> denied  flow a.test:443  (1 event; was allowed; now port-not-allowed by a.test:8080)",
		"denied -> allowed  flow a.test:8080  (1 event; was port-not-allowed; now allowed by a.test:8080)",
		"denied -> allowed  request POST a.test/admin  (1 event; was http-denied; now allowed by a.test:8080)",
		"allowed -> denied  mcp srv.test/mcp read  (1 event; was allowed; now no-matching-rule)",
		"denied -> allowed  mcp srv.test/mcp write  (1 event; was mcp-tool-denied; now allowed by mcp.rules[1] (line 8) server=srv.test tools=write action=allow)",
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("policy check printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The suggestion of the same session decides everything as it was.
	sugg := filepath.Join(t.TempDir(), "s.toml")
	if _, stderr, code := capsemOut(t, "policy", "suggest", "--data", data, "-o", sugg, id); code != 0 || stderr != "" {
		t.Fatalf("suggest: exit %d %s", code, stderr)
	}
	if out, stderr, code := capsemOut(t, "policy", "check", "--data", data, sugg, id); code != 0 {
		text, _ := os.ReadFile(sugg)
		t.Errorf("check against the suggestion: exit %d\n%s%s\nthe suggestion:\n%s", code, out, stderr, text)
	}
	// --from-denied allows what was refused, and says so.
	out, _, _ = capsemOut(t, "policy", "suggest", "--data", data, "--from-denied", id)
	if !strings.Contains(out, `"b.test", # DENIED in the session: 1 event (denied-name)`) || !strings.Contains(out, `"a.test:8080", # DENIED`) {
		t.Errorf("--from-denied:\n%s", out)
	}
	if _, stderr, code := capsemOut(t, "policy", "check", "--data", data, pol); code != 2 || !strings.Contains(stderr, "SESSION") {
		t.Errorf("check without a session: exit %d %s", code, stderr)
	}
}
