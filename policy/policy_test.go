package policy

import (
	"fmt"
	"sync"
	"testing"
)

// matchPolicy exercises every matching rule. Line numbers do not matter here.
const matchPolicy = `
[network]
default = "deny"
allow = [
  "api.anthropic.com",
  "*.githubusercontent.com",
  "pypi.org:443",
  "example.test:8080",
  "Mixed.Case.Example.",
  "*.github.com",
  "multi.test",
  "multi.test:8443",
  "*.corp.test",
  "*.portdeny.test",
  "*.portdeny.test:8080",
  "*.allports.test",
  "api.blocked.test",
  "under_score.test",
]
deny = [
  "uploads.github.com",
  "secret.corp.test",
  "*.internal.corp.test",
  "x.portdeny.test:443",
  "z.allports.test:443",
  "*.blocked.test",
]
`

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse("p.toml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestDecideFlow(t *testing.T) {
	p := mustParse(t, matchPolicy)
	tests := []struct {
		name   string
		port   uint16
		want   Decision
		reason string // why this case exists
	}{
		{"api.anthropic.com", 443, Decision{Allowed: true, Rule: "api.anthropic.com", Reason: ReasonAllowed}, "exact name, default port 443"},
		{"API.Anthropic.COM", 443, Decision{Allowed: true, Rule: "api.anthropic.com", Reason: ReasonAllowed}, "case-insensitive"},
		{"api.anthropic.com.", 443, Decision{Allowed: true, Rule: "api.anthropic.com", Reason: ReasonAllowed}, "trailing dot"},
		{"api.anthropic.com", 80, Decision{Allowed: false, Rule: "api.anthropic.com", Reason: ReasonPortNotAllowed}, "no port means 443 only"},
		{"api.anthropic.com", 0, Decision{Allowed: false, Rule: "api.anthropic.com", Reason: ReasonPortNotAllowed}, "port 0 is never allowed"},
		{"x.api.anthropic.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "exact does not match subdomains"},
		{"anthropic.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "exact does not match parents"},
		{"raw.githubusercontent.com", 443, Decision{Allowed: true, Rule: "*.githubusercontent.com", Reason: ReasonAllowed}, "wildcard, one level"},
		{"a.b.c.githubusercontent.com", 443, Decision{Allowed: true, Rule: "*.githubusercontent.com", Reason: ReasonAllowed}, "wildcard, any depth"},
		{"RAW.GitHubUserContent.com.", 443, Decision{Allowed: true, Rule: "*.githubusercontent.com", Reason: ReasonAllowed}, "wildcard, case and dot"},
		{"githubusercontent.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "wildcard does not match the apex"},
		{"evilgithubusercontent.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "wildcard matches whole labels"},
		{"raw.githubusercontent.com", 8080, Decision{Allowed: false, Rule: "*.githubusercontent.com", Reason: ReasonPortNotAllowed}, "wildcard, default port only"},
		{"pypi.org", 443, Decision{Allowed: true, Rule: "pypi.org:443", Reason: ReasonAllowed}, "explicit port 443"},
		{"pypi.org", 80, Decision{Allowed: false, Rule: "pypi.org:443", Reason: ReasonPortNotAllowed}, "explicit port only"},
		{"example.test", 8080, Decision{Allowed: true, Rule: "example.test:8080", Reason: ReasonAllowed}, "explicit non-default port"},
		{"example.test", 443, Decision{Allowed: false, Rule: "example.test:8080", Reason: ReasonPortNotAllowed}, "explicit port does not add 443"},
		{"mixed.case.example", 443, Decision{Allowed: true, Rule: "Mixed.Case.Example.", Reason: ReasonAllowed}, "entries normalized, reported as written"},
		{"multi.test", 443, Decision{Allowed: true, Rule: "multi.test", Reason: ReasonAllowed}, "several ports for a name (443)"},
		{"multi.test", 8443, Decision{Allowed: true, Rule: "multi.test:8443", Reason: ReasonAllowed}, "several ports for a name (8443)"},
		{"multi.test", 8080, Decision{Allowed: false, Rule: "multi.test", Reason: ReasonPortNotAllowed}, "several ports, not this one"},
		{"api.github.com", 443, Decision{Allowed: true, Rule: "*.github.com", Reason: ReasonAllowed}, "allowed by wildcard"},
		{"uploads.github.com", 443, Decision{Allowed: false, Rule: "uploads.github.com", Reason: ReasonDeniedByRule}, "deny wins over allow"},
		{"uploads.github.com", 8080, Decision{Allowed: false, Rule: "uploads.github.com", Reason: ReasonDeniedByRule}, "port-less deny denies every port"},
		{"UPLOADS.github.com.", 443, Decision{Allowed: false, Rule: "uploads.github.com", Reason: ReasonDeniedByRule}, "deny is case-insensitive"},
		{"a.uploads.github.com", 443, Decision{Allowed: true, Rule: "*.github.com", Reason: ReasonAllowed}, "exact deny does not cover subdomains"},
		{"secret.corp.test", 443, Decision{Allowed: false, Rule: "secret.corp.test", Reason: ReasonDeniedByRule}, "exact deny under an allowed wildcard"},
		{"a.internal.corp.test", 443, Decision{Allowed: false, Rule: "*.internal.corp.test", Reason: ReasonDeniedByRule}, "wildcard deny"},
		{"a.b.internal.corp.test", 443, Decision{Allowed: false, Rule: "*.internal.corp.test", Reason: ReasonDeniedByRule}, "wildcard deny, any depth"},
		{"internal.corp.test", 443, Decision{Allowed: true, Rule: "*.corp.test", Reason: ReasonAllowed}, "wildcard deny does not cover its apex"},
		{"x.portdeny.test", 443, Decision{Allowed: false, Rule: "x.portdeny.test:443", Reason: ReasonDeniedByRule}, "port deny"},
		{"x.portdeny.test", 8080, Decision{Allowed: true, Rule: "*.portdeny.test:8080", Reason: ReasonAllowed}, "port deny leaves other ports"},
		{"y.portdeny.test", 443, Decision{Allowed: true, Rule: "*.portdeny.test", Reason: ReasonAllowed}, "port deny is per name"},
		{"api.blocked.test", 443, Decision{Allowed: false, Rule: "*.blocked.test", Reason: ReasonDeniedByRule}, "a broader deny beats a more specific allow"},
		{"under_score.test", 443, Decision{Allowed: true, Rule: "under_score.test", Reason: ReasonAllowed}, "underscores"},
		{"unknown.test", 443, Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "default deny"},
		{"", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "empty"},
		{".", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "root"},
		{"a..githubusercontent.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "empty label"},
		{"a b.githubusercontent.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "space"},
		{"a\x00.githubusercontent.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "NUL"},
		{"-a.githubusercontent.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "leading hyphen"},
		{"*.githubusercontent.com", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "a query is never a pattern"},
		{"api.anthropic.com..", 443, Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "two trailing dots"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s:%d", tc.name, tc.port), func(t *testing.T) {
			if got := p.DecideFlow(tc.name, tc.port); got != tc.want {
				t.Errorf("DecideFlow(%q, %d) = %+v, want %+v (%s)", tc.name, tc.port, got, tc.want, tc.reason)
			}
		})
	}
}

func TestDecideName(t *testing.T) {
	p := mustParse(t, matchPolicy)
	tests := []struct {
		name   string
		want   Decision
		reason string
	}{
		{"api.anthropic.com", Decision{Allowed: true, Rule: "api.anthropic.com", Reason: ReasonAllowed}, "exact"},
		{"Api.Anthropic.Com.", Decision{Allowed: true, Rule: "api.anthropic.com", Reason: ReasonAllowed}, "case and trailing dot"},
		{"example.test", Decision{Allowed: true, Rule: "example.test:8080", Reason: ReasonAllowed}, "allowed on a non-default port only"},
		{"pypi.org", Decision{Allowed: true, Rule: "pypi.org:443", Reason: ReasonAllowed}, "explicit port"},
		{"a.b.githubusercontent.com", Decision{Allowed: true, Rule: "*.githubusercontent.com", Reason: ReasonAllowed}, "wildcard depth"},
		{"githubusercontent.com", Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "wildcard apex"},
		{"uploads.github.com", Decision{Allowed: false, Rule: "uploads.github.com", Reason: ReasonDeniedByRule}, "port-less deny denies DNS"},
		{"a.internal.corp.test", Decision{Allowed: false, Rule: "*.internal.corp.test", Reason: ReasonDeniedByRule}, "wildcard deny denies DNS"},
		{"x.portdeny.test", Decision{Allowed: true, Rule: "*.portdeny.test:8080", Reason: ReasonAllowed}, "a port deny leaves the name resolvable via another port"},
		{"z.allports.test", Decision{Allowed: false, Rule: "z.allports.test:443", Reason: ReasonDeniedByRule}, "every allowed port denied: no DNS"},
		{"y.allports.test", Decision{Allowed: true, Rule: "*.allports.test", Reason: ReasonAllowed}, "sibling unaffected"},
		{"api.blocked.test", Decision{Allowed: false, Rule: "*.blocked.test", Reason: ReasonDeniedByRule}, "broader deny wins"},
		{"nothing.test", Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "default deny"},
		{"bad name", Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "invalid"},
	}
	for _, tc := range tests {
		if got := p.DecideName(tc.name); got != tc.want {
			t.Errorf("DecideName(%q) = %+v, want %+v (%s)", tc.name, got, tc.want, tc.reason)
		}
	}
	// DecideName is allowed exactly when some port is.
	for _, name := range []string{"api.anthropic.com", "example.test", "uploads.github.com", "x.portdeny.test", "z.allports.test", "multi.test"} {
		any := false
		for _, port := range []uint16{443, 8080, 8443} {
			any = any || p.DecideFlow(name, port).Allowed
		}
		if got := p.DecideName(name).Allowed; got != any {
			t.Errorf("DecideName(%q).Allowed = %v, but some DecideFlow allowed = %v", name, got, any)
		}
	}
}

func TestDenyAll(t *testing.T) {
	for _, p := range []*Policy{DenyAll(), nil, mustParse(t, ""), mustParse(t, "# nothing\n[upstream]\nallow_private = true\n"), mustParse(t, "[network]\n"), mustParse(t, "[network]\ndefault = \"deny\"\nallow = []\n")} {
		for _, name := range []string{"api.anthropic.com", "localhost", "example.com"} {
			if d := p.DecideName(name); d != (Decision{Reason: ReasonNoMatchingRule}) {
				t.Errorf("DecideName(%q) = %+v", name, d)
			}
			for _, port := range []uint16{0, 53, 80, 443, 65535} {
				if d := p.DecideFlow(name, port); d != (Decision{Reason: ReasonNoMatchingRule}) {
					t.Errorf("DecideFlow(%q, %d) = %+v", name, port, d)
				}
			}
			if _, ok := p.Resolve(name); ok {
				t.Errorf("Resolve(%q) found a target", name)
			}
		}
		allow, deny := p.Rules()
		if len(allow)+len(deny) != 0 {
			t.Errorf("Rules() = %v, %v", allow, deny)
		}
	}
	if d := DenyAll().DecideName("bad..name"); d.Reason != ReasonInvalidName {
		t.Errorf("DenyAll invalid name: %+v", d)
	}
}

func TestRules(t *testing.T) {
	p := mustParse(t, "[network]\nallow = [\"B.example\", \"a.example:8080\", \"*.c.example\"]\ndeny = [\"x.c.example\", \"y.c.example:80\"]\n")
	allow, deny := p.Rules()
	if fmt.Sprint(allow) != "[B.example a.example:8080 *.c.example]" || fmt.Sprint(deny) != "[x.c.example y.c.example:80]" {
		t.Fatalf("Rules() = %q, %q", allow, deny)
	}
	allow[0] = "mutated"
	if again, _ := p.Rules(); again[0] != "B.example" {
		t.Fatal("Rules() returned the policy's own slice")
	}
}

func TestResolve(t *testing.T) {
	p := mustParse(t, `
[network]
allow = ["a.test"]
[upstream]
resolve = { "a.test" = "127.0.0.1:8443", "b.test" = "10.0.0.1", "c.test" = "backend.internal", "d.test" = "Backend.Internal.:9000", "e.test" = "[::1]:8443", "f.test" = "2001:db8::1", "G.Test." = "192.0.2.1:443", "h.test" = "localhost" }
`)
	tests := []struct {
		name string
		want Target
	}{
		{"a.test", Target{"127.0.0.1", 8443, true}},
		{"b.test", Target{"10.0.0.1", 0, true}},
		{"c.test", Target{"backend.internal", 0, false}},
		{"d.test", Target{"backend.internal", 9000, false}},
		{"e.test", Target{"::1", 8443, true}},
		{"f.test", Target{"2001:db8::1", 0, true}},
		{"g.test", Target{"192.0.2.1", 443, true}},
		{"G.TEST.", Target{"192.0.2.1", 443, true}},
		{"h.test", Target{"localhost", 0, false}},
	}
	for _, tc := range tests {
		got, ok := p.Resolve(tc.name)
		if !ok || got != tc.want {
			t.Errorf("Resolve(%q) = %+v, %v; want %+v", tc.name, got, ok, tc.want)
		}
	}
	for _, name := range []string{"x.a.test", "test", "", "a..test"} {
		if got, ok := p.Resolve(name); ok {
			t.Errorf("Resolve(%q) = %+v, want none", name, got)
		}
	}
}

func TestUpstreamTable(t *testing.T) {
	p := mustParse(t, "[upstream.resolve]\n\"a.test\" = \"127.0.0.1\"\n[upstream]\nallow_private = true\n")
	if got, ok := p.Resolve("a.test"); !ok || got != (Target{"127.0.0.1", 0, true}) {
		t.Errorf("Resolve = %+v, %v", got, ok)
	}
	if !p.AllowPrivate {
		t.Error("AllowPrivate not set")
	}
	if mustParse(t, "").AllowPrivate {
		t.Error("AllowPrivate defaults to true")
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM.": "example.com",
		"a-b_c.d":      "a-b_c.d",
		"x":            "x",
	} {
		if got, ok := Canonical(in); !ok || got != want {
			t.Errorf("Canonical(%q) = %q, %v", in, got, ok)
		}
	}
	long := ""
	for range 4 {
		long += "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa." // 63+1
	}
	for _, in := range []string{"", ".", "..", ".a", "a..b", "a.-b", "a-.b", "a b", "é.com", "a/b", long + "a", "*.a",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com"} {
		if got, ok := Canonical(in); ok {
			t.Errorf("Canonical(%q) = %q, ok", in, got)
		}
	}
	if _, ok := Canonical(long[:253]); !ok {
		t.Errorf("a 253-character name is valid")
	}
}

// TestConcurrent runs decisions from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	p := mustParse(t, matchPolicy)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				name := fmt.Sprintf("h%d.Raw.GitHubUserContent.com", (i+g)%10)
				if !p.DecideFlow(name, 443).Allowed || !p.DecideName(name).Allowed {
					t.Errorf("%s denied", name)
					return
				}
				if p.DecideFlow("uploads.github.com", 443).Allowed {
					t.Error("uploads allowed")
					return
				}
				p.Resolve(name)
				p.Rules()
			}
		}()
	}
	wg.Wait()
}
