package tests

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestScrubFixedPlaceholder: `capsem export --scrub` must redact a
// placeholder the policy fixed (placeholder = "…") as well as those capsem
// makes (capsem-secret-…), which it cannot recognise by their shape: the
// session's record keeps its placeholders, those a reload brings too, so
// the export has no copy of them. capsem-net with
// a namespace guest; the guest sends each placeholder to its host, to
// another host (refused), percent-encoded, and as a DNS name.
func TestScrubFixedPlaceholder(t *testing.T) {
	needHarness(t)
	ca := newTestCA(t, "tests upstream CA")
	rec := &recorder{}
	port := startHTTPS(t, ca, rec, "api.test", "other.test")
	_, _, tokenFile := writeTokenFiles(t)
	const fixed = "Fixed-Placeholder-Token-0001"
	const added = "Added-By-Reload-Placeholder-02"
	policy := func(extra string) string {
		return fmt.Sprintf(`
[network]
allow = ["other.test", "*.wild.test"]

[upstream]
resolve = { "api.test" = "127.0.0.1:%[1]d", "other.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[[secret]]
name = "TOKEN"
from_file = %[3]q
hosts = ["api.test"]
placeholder = %[4]q
%[5]s`, port, ca.pemPath, tokenFile, fixed, extra)
	}
	e := startEnv(t, policy(""), envOptions{})
	if got := e.placeholders()["TOKEN"]; got != fixed {
		t.Fatalf("the guest holds %q, want the fixed placeholder", got)
	}
	send := func(ph string) {
		t.Helper()
		for _, args := range []string{
			`-H "X-Token: ` + ph + `" "https://api.test/rec?m=own&k=` + ph + `"`,
			`-H "X-Token: ` + ph + `" "https://other.test/rec?m=leak&k=` + url.QueryEscape(ph) + `"`,
			`"https://other.test/rec/` + ph + `?m=path"`,
			`--data-binary "body ` + ph + `" "https://other.test/rec?m=body"`,
			`"https://` + ph + `.wild.test/"`,
		} {
			out, _ := e.runEnv(60*time.Second, e.trustEnv(), "sh", "-c", "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "+args)
			t.Logf("curl %s: %s", args, out)
		}
	}
	send(fixed)

	// A reload brings a second secret with a placeholder of its own.
	if err := os.WriteFile(e.policyPath, []byte(policy(fmt.Sprintf(`
[[secret]]
name = "ADDED"
from_file = %q
hosts = ["api.test"]
placeholder = %q
`, tokenFile+".body", added))), 0o644); err != nil {
		t.Fatal(err)
	}
	e.signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.out.String(), "policy reloaded") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.placeholders()["ADDED"]; got != added {
		t.Fatalf("after the reload the guest holds %q, want %q", got, added)
	}
	send(added)
	e.stop()

	export := func(scrub bool) []byte {
		out := filepath.Join(t.TempDir(), "export.db")
		args := []string{"export", "--sqlite", out, "--data", e.dataDir, "--all"}
		if scrub {
			args = append(args, "--scrub")
		}
		if b, err := exec.Command(capsemBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("capsem export: %v\n%s", err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.ToLower(b)
	}
	for _, ph := range []string{fixed, added} {
		if !bytes.Contains(export(false), []byte(strings.ToLower(ph))) {
			t.Fatalf("the export without --scrub has no %s: the guest's requests did not carry it", ph)
		}
		if bytes.Contains(export(true), []byte(strings.ToLower(ph))) {
			t.Errorf("capsem export --scrub holds the placeholder %s", ph)
		}
	}
}
