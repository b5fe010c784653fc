package dlp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/capsem/capsem/dlp/dlptest"
)

func TestScrubEachKind(t *testing.T) {
	for _, p := range dlptest.Plants {
		for _, wrap := range []string{"%s", "before %s after", "line one\n%s\nline three", `{"k":"%s"}`, "x=%s&y=2"} {
			in := fmt.Sprintf(wrap, p.Text)
			got := Scrub(in)
			for _, n := range p.Needles {
				if strings.Contains(got, n) {
					t.Errorf("Scrub(%q) = %q: %q survives", in, got, n)
				}
			}
			if !strings.Contains(got, "[REDACTED:"+p.Kind+"]") {
				t.Errorf("Scrub(%q) = %q: no [REDACTED:%s]", in, got, p.Kind)
			}
			if again := Scrub(got); again != got {
				t.Errorf("Scrub is not idempotent: %q then %q", got, again)
			}
		}
	}
}

func TestScrubExact(t *testing.T) {
	for in, want := range map[string]string{
		"Authorization: Bearer sk-ant-api03-xxxxxxxxxxxxxxxx\r\nHost: a": "Authorization: [REDACTED:authorization]\r\nHost: a",
		"curl -H 'Authorization: Bearer abcdefgh12345678' https://x":     "curl -H 'Authorization: [REDACTED:authorization]",
		"use Bearer abcdefgh12345678 here":                               "use Bearer [REDACTED:bearer] here",
		"key=AIzaSyD-1234567890abcdefghijklmnopqrstu&q=1":                "key=[REDACTED:google-api-key]&q=1",
		"sk-ant-api03-aaaaaaaaaaaa.exfil.example.com":                    "[REDACTED:anthropic-key].exfil.example.com",
		`{"x-api-key":"k123","model":"m"}`:                               `{"x-api-key":"[REDACTED:x-api-key]","model":"m"}`,
	} {
		if got := Scrub(in); got != want {
			t.Errorf("Scrub(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

// TestScrubLeavesOrdinaryText guards against redacting what is not a
// secret: the typical events come out of a scrubbed export unchanged.
func TestScrubLeavesOrdinaryText(t *testing.T) {
	for _, s := range []string{
		"", "/v1/messages", "api.anthropic.com", "risk-management-strategies-for-2026", "task-runner",
		"our cookie policy", "the bearer of bad news", "Bearer tokens are short", "Content-Type: application/json",
		`{"model":"claude-sonnet-4","max_tokens":1024}`, "ghost_town", "AKIA", "xoxo", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"NXDOMAIN", "198.19.0.7", "ok\uFFFDend", "é日本",
	} {
		if got := Scrub(s); got != s {
			t.Errorf("Scrub(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestScrubPlaceholders(t *testing.T) {
	for _, c := range []struct{ in, want, why string }{
		{"token x capsem-secret-0123456789abcdef0123456789abcdef y", "token x [REDACTED:secret-placeholder] y", "the placeholder alone goes, whatever holds it"},
		{`{"key":"capsem-secret-0123456789abcdef0123456789abcdef"}`, `{"key":"[REDACTED:secret-placeholder]"}`, "in JSON"},
		{"capsem-secret-0123", "capsem-secret-0123", "not a placeholder capsem makes"},
	} {
		if got := Scrub(c.in); got != c.want {
			t.Errorf("%s: Scrub(%q) = %q, want %q", c.why, c.in, got, c.want)
		}
	}
}
