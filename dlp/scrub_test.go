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

// A Scrubber redacts a session's placeholders, fixed ones too, in every
// form and case a request or a DNS name holds them.
func TestScrubberFixedPlaceholders(t *testing.T) {
	const fixed = "My-Fixed/Placeholder+Anthropic"
	sc := NewScrubber([]string{fixed, "", "second-fixed-placeholder"})
	red := "[REDACTED:secret-placeholder]"
	for _, c := range []struct{ in, want, why string }{
		{"token: " + fixed, "token: " + red, "as written"},
		{"q=My-Fixed%2FPlaceholder%2BAnthropic&x=1", "q=" + red + "&x=1", "percent-encoded for a query"},
		{"/v1/My-Fixed%2FPlaceholder+Anthropic/x", "/v1/" + red + "/x", "percent-encoded for a path"},
		{"my-fixed/placeholder+anthropic.evil.test", red + ".evil.test", "lower-cased, as a DNS name"},
		{"a second-fixed-placeholder b " + fixed, "a " + red + " b " + red, "two of them"},
		{"ghp_16C7e42F292c6912E7710c838347Ae178B4a " + fixed, "[REDACTED:github-token] " + red, "and what Scrub finds"},
		{"capsem-secret-0123456789abcdef0123456789abcdef", red, "generated ones as Scrub does"},
		{"é日本 My-Fixed/Placeholder+Anthropic İ", "é日本 " + red + " İ", "offsets kept around runes whose lower case is longer"},
		{"nothing here", "nothing here", "text without them is unchanged"},
	} {
		got := sc.Scrub(c.in)
		if got != c.want {
			t.Errorf("%s: Scrub(%q) = %q, want %q", c.why, c.in, got, c.want)
		}
		if again := sc.Scrub(got); again != got {
			t.Errorf("%s: not idempotent: %q then %q", c.why, got, again)
		}
	}
	if n, v := sc.ScrubHeader("X-Token", "Bearer-less "+fixed); n != "X-Token" || v != "Bearer-less "+red {
		t.Errorf("ScrubHeader: %q %q", n, v)
	}
	words := []string{"curl", "-H", "X-Token: " + fixed, "https://a.test/?k=" + fixed}
	if got := sc.ScrubArgv(words); strings.Contains(strings.Join(got, " "), fixed) || got[0] != "curl" || words[2] != "X-Token: "+fixed {
		t.Errorf("ScrubArgv(%q) = %q (and the words given must stay)", words, got)
	}
	// A placeholder that a redaction holds is redacted in text, and the
	// redaction left alone: Scrub stays idempotent.
	sc2 := NewScrubber([]string{"secret-placeholder"})
	if got := sc2.Scrub("a secret-placeholder b"); got != "a "+red+" b" || sc2.Scrub(got) != got {
		t.Errorf("a placeholder inside the redaction's text: %q, then %q", got, sc2.Scrub(got))
	}
	var none *Scrubber
	if NewScrubber(nil) != nil || NewScrubber([]string{""}) != nil || none.Scrub("ghp_16C7e42F292c6912E7710c838347Ae178B4a") != "[REDACTED:github-token]" {
		t.Error("a nil Scrubber is Scrub")
	}
}
