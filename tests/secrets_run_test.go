package tests

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSecretClaudeInTheGuest runs the real claude CLI in the real guest
// with `capsem run --secret ANTHROPIC_API_KEY`, against the fake
// api.anthropic.com: the guest holds only the placeholder (its environment
// and every process's /proc/PID/environ), the fake API receives the real
// key, the model call is recorded, and the real key is in neither the data
// directory nor an export.
func TestRunSecretClaudeInTheGuest(t *testing.T) {
	needGuest(t)
	ca := newTestCA(t, "tests upstream CA")
	fake := newClaudeFake()
	port := startHTTPS(t, ca, fake, "api.anthropic.com")
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.toml")
	// No [network] entry: the secret allows its host on 443 by itself.
	if err := os.WriteFile(pol, []byte(fmt.Sprintf(`
[upstream]
resolve = { "api.anthropic.com" = "127.0.0.1:%d" }
ca_files = [%q]
`, port, ca.pemPath)), 0o644); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 24)
	rand.Read(b)
	real := "sk-ant-api03-" + hex.EncodeToString(b)
	data, ws := filepath.Join(dir, "data"), t.TempDir()

	// The guest prints what it holds under the name, in its environment and
	// in every process's; then claude runs its tool loop.
	script := `echo "env: $(printenv ANTHROPIC_API_KEY)"
for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done | grep '^ANTHROPIC_API_KEY=' | sort -u | sed 's/^/proc: /'
cd /workspace && HOME=/tmp/claude-home claude -p "Run the capsem marker command." --allowedTools Bash`
	flags := []string{"--secret", "ANTHROPIC_API_KEY"}
	for _, kv := range []string{"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"} {
		flags = append(flags, "--env", kv)
	}
	r := capsemRun(t, runOpts{policy: pol, data: data, workspace: ws, env: []string{"ANTHROPIC_API_KEY=" + real}}, flags, "sh", "-c", script)
	t.Logf("the fake API saw:\n%s", fake.log())
	if r.code != 0 || !strings.Contains(r.stdout, claudeFinal+" The tool said: "+claudeMarker) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var ph string
	for _, line := range strings.Split(r.stdout, "\n") {
		if v, ok := strings.CutPrefix(line, "env: "); ok {
			ph = v
		}
		if v, ok := strings.CutPrefix(line, "proc: ANTHROPIC_API_KEY="); ok && v != ph {
			t.Errorf("a guest process holds ANTHROPIC_API_KEY=%q, not the placeholder %q", v, ph)
		}
	}
	if !strings.HasPrefix(ph, "capsem-secret-") || !strings.Contains(r.stdout, "proc: ANTHROPIC_API_KEY="+ph) {
		t.Errorf("the guest's ANTHROPIC_API_KEY is %q (want a capsem-secret- placeholder, seen in /proc too)\n%s", ph, r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, real) {
		t.Error("the real key reached the guest's output")
	}
	calls := 0
	for _, q := range fake.seen() {
		if q.Path == "/v1/messages" {
			calls++
			if q.APIKey != real {
				t.Errorf("the fake API got the key %q, want the real one", q.APIKey)
			}
		}
	}
	if calls < 2 {
		t.Errorf("the fake API saw %d model calls, want the tool loop's two", calls)
	}
	db := claudeExport(t, data)
	if n := tableRows(t, db, "model_calls"); n < 2 {
		t.Errorf("%d model calls recorded", n)
	}
	db.Close()
	assertNowhere(t, data, real)
}
