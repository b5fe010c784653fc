package tests

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// TestDLPExpectedHosts: a provider's key sent to the provider's API host
// in the request head is where it belongs, not a finding (or every claude
// request to api.anthropic.com would be dlp-match
// anthropic-key@X-Api-Key); the same key to another allowed
// host is one, and so is the key in a body to the provider, which keeps
// it as data. curl in the guest, through the MITM, to a name
// api.anthropic.com that [upstream] resolve points at the tests' upstream.
func TestDLPExpectedHosts(t *testing.T) {
	needHarness(t)
	ca := newTestCA(t, "tests upstream CA")
	rec := &recorder{}
	port := startHTTPS(t, ca, rec, "api.anthropic.com", "other.test")
	policy := func(action string) string {
		return fmt.Sprintf(`
[network]
default = "deny"
allow = ["api.anthropic.com:443", "other.test:443"]

[upstream]
resolve = { "api.anthropic.com" = "127.0.0.1:%[1]d", "other.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[dlp]
action = %[3]q
`, port, ca.pemPath, action)
	}
	e := startEnv(t, policy("log"), envOptions{})
	const key = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AbCdEfGh"
	curl := func(args string) string {
		t.Helper()
		out, err := e.runEnv(60*time.Second, e.trustEnv(), "sh", "-c", "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "+args)
		if err != nil {
			t.Errorf("curl %s: %v\n%s", args, err, out)
		}
		return out
	}
	for _, c := range []struct{ mark, args string }{
		{"log-home", `-H "X-Api-Key: ` + key + `" "https://api.anthropic.com/v1/messages?m=log-home"`},
		{"log-other", `-H "X-Api-Key: ` + key + `" "https://other.test/v1/messages?m=log-other"`},
		{"log-body", `-H "X-Api-Key: ` + key + `" --data-binary "key=` + key + `" "https://api.anthropic.com/v1/messages?m=log-body"`},
	} {
		if got := curl(c.args); got != "200" {
			t.Errorf("log %s: status %s, want 200 (log lets every request go)", c.mark, got)
		}
	}

	if err := os.WriteFile(e.policyPath, []byte(policy("block")), 0o644); err != nil {
		t.Fatal(err)
	}
	e.signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.out.String(), "policy reloaded") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range []struct{ mark, args, want, why string }{
		{"block-home", `-H "X-Api-Key: ` + key + `" "https://api.anthropic.com/v1/messages?m=block-home"`, "200", "the key at its home: not blocked"},
		{"block-other", `-H "X-Api-Key: ` + key + `" "https://other.test/v1/messages?m=block-other"`, "403", "the key to another host"},
		{"block-body", `--data-binary "key=` + key + `" "https://api.anthropic.com/v1/messages?m=block-body"`, "403", "the key as data in a body, even at its home"},
	} {
		if got := curl(c.args); got != c.want {
			t.Errorf("block %s: status %s, want %s (%s)", c.mark, got, c.want, c.why)
		}
	}
	for _, mark := range []string{"log-home", "log-other", "log-body", "block-home"} {
		if got := rec.with("m=" + mark); len(got) != 1 || got[0].header.Get("X-Api-Key") != key {
			t.Errorf("%s: the upstream got %d requests with the key, want 1", mark, len(got))
		}
	}
	for _, mark := range []string{"block-other", "block-body"} {
		if got := rec.with("m=" + mark); len(got) != 0 {
			t.Errorf("%s: a blocked request reached the upstream", mark)
		}
	}

	evs := e.stop()
	for _, c := range []struct {
		mark     string
		decision store.Decision
		reason   string
		rule     string
		why      string
	}{
		{"log-home", store.Allowed, "allowed", "api.anthropic.com:443", "no finding at the key's home"},
		{"log-other", store.Allowed, "dlp-match", "anthropic-key@X-Api-Key", "a finding elsewhere"},
		{"log-body", store.Allowed, "dlp-match", "anthropic-key@body@4", "a key in the body is data"},
		{"block-home", store.Allowed, "allowed", "api.anthropic.com:443", "not blocked at its home"},
		{"block-other", store.Denied, "dlp-match", "anthropic-key@X-Api-Key", "blocked elsewhere"},
		{"block-body", store.Denied, "dlp-match", "anthropic-key@body@4", "blocked in the body"},
	} {
		n := netEvent(evs, func(n *store.Net) bool { return strings.Contains(n.Query, "m="+c.mark) })
		if n == nil || n.Decision != c.decision || n.Reason != c.reason || n.MatchedRule != c.rule {
			t.Errorf("%s: event %+v, want %s %s %s (%s)", c.mark, n, c.decision, c.reason, c.rule, c.why)
		}
	}
	if t.Failed() {
		t.Log(dumpEvents(evs))
	}
}
