package sqliteexport

import (
	"regexp"
	"strings"
)

// A secret pattern: re matches the secret (or, with keep > 0, a prefix to
// keep in submatches 1..keep followed by the secret); triggers are literal
// substrings one of which every match contains, checked first so that text
// without any of them is returned untouched at the cost of a few scans.
type secretRule struct {
	kind     string
	re       *regexp.Regexp
	keep     int  // leading submatches kept verbatim
	fold     bool // triggers are matched case-insensitively (given in lower case)
	triggers []string
}

// sensitiveHeaders are the headers whose whole value is a credential. Keys
// are lower case; the value is the redaction kind.
var sensitiveHeaders = map[string]string{
	"authorization":       "authorization",
	"proxy-authorization": "authorization",
	"x-api-key":           "x-api-key",
	"api-key":             "x-api-key",
	"x-goog-api-key":      "x-api-key",
	"cookie":              "cookie",
	"set-cookie":          "set-cookie",
}

// The rules, in the order they apply. Header-shaped text comes first so
// that "Authorization: Bearer sk-…" becomes one redaction; the token rules
// then catch keys wherever else they appear. A replacement never matches
// any rule, so Scrub(Scrub(s)) == Scrub(s).
var secretRules = []secretRule{
	{
		// A PEM private key block; a block cut off by a preview limit is
		// redacted to the end of the text.
		kind:     "private-key",
		re:       regexp.MustCompile(`-----BEGIN[ A-Z0-9]*PRIVATE KEY-----(?s:.*?)(?:-----END[ A-Z0-9]*PRIVATE KEY-----|\z)`),
		triggers: []string{"-----BEGIN"},
	},
	{
		// A credential header written as text: a header line
		// ("Cookie: a=b"), JSON ("x-api-key": "…"), or a form or query
		// parameter (authorization=…). The value runs to the end of the
		// line, the closing quote, or (after '=') the next '&'.
		kind: "header",
		re: regexp.MustCompile(`(?i)\b(proxy-authorization|authorization|x-goog-api-key|x-api-key|api-key|set-cookie|cookie)` +
			`(?:(\\?"?[ \t]*:[ \t]*\\?"?)((?:[^\r\n"\\]|\\[^"])+)|(=)([^&\s"]+))`),
		fold:     true,
		triggers: []string{"authorization", "api-key", "cookie"},
	},
	{
		kind:     "bearer",
		re:       regexp.MustCompile(`(?i)\b(bearer[ \t]+)([A-Za-z0-9\-._~+/]{8,}=*)`),
		keep:     1,
		fold:     true,
		triggers: []string{"bearer"},
	},
	{
		kind:     "anthropic-key",
		re:       regexp.MustCompile(`sk-ant-[A-Za-z0-9_\-]{8,}`),
		triggers: []string{"sk-ant-"},
	},
	{
		kind:     "openai-key",
		re:       regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`),
		triggers: []string{"sk-"},
	},
	{
		kind:     "google-key",
		re:       regexp.MustCompile(`AIza[0-9A-Za-z_\-]{20,}`),
		triggers: []string{"AIza"},
	},
	{
		kind:     "github-token",
		re:       regexp.MustCompile(`(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`),
		triggers: []string{"gh", "github_pat_"},
	},
	{
		kind:     "aws-key",
		re:       regexp.MustCompile(`(?:AKIA|ASIA)[0-9A-Z]{16}`),
		triggers: []string{"AKIA", "ASIA"},
	},
	{
		kind:     "slack-token",
		re:       regexp.MustCompile(`xox[baprs]-[A-Za-z0-9\-]{10,}`),
		triggers: []string{"xox"},
	},
}

// Scrub returns s with every secret it recognises replaced by
// "[REDACTED:<kind>]": Anthropic and OpenAI keys (sk-ant-…, sk-…), Google
// API keys (AIza…), GitHub tokens (ghp_…, gho_…, github_pat_…), AWS access
// key ids (AKIA…, ASIA…), Slack tokens (xoxb-…), the values of
// Authorization, Proxy-Authorization, X-Api-Key, Cookie and Set-Cookie
// written as header lines, JSON members or parameters, Bearer tokens, and
// PEM private key blocks. Text without any of those is returned as is.
// Scrub is idempotent.
func Scrub(s string) string {
	for i := range secretRules {
		r := &secretRules[i]
		if !r.triggered(s) {
			continue
		}
		s = r.replace(s)
	}
	return s
}

func (r *secretRule) triggered(s string) bool {
	for _, t := range r.triggers {
		if r.fold {
			if containsFold(s, t) {
				return true
			}
		} else if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

func (r *secretRule) replace(s string) string {
	if r.kind == "header" {
		return r.re.ReplaceAllStringFunc(s, func(m string) string {
			// 1 name; 2 ":" separator and 3 value; or 4 "=" and 5 value.
			sm := r.re.FindStringSubmatch(m)
			kind := sensitiveHeaders[strings.ToLower(sm[1])]
			if sm[4] != "" {
				return sm[1] + sm[4] + redaction(kind)
			}
			return sm[1] + sm[2] + redaction(kind)
		})
	}
	if r.keep == 0 {
		return r.re.ReplaceAllLiteralString(s, redaction(r.kind))
	}
	return r.re.ReplaceAllString(s, "${1}"+redaction(r.kind))
}

func redaction(kind string) string { return "[REDACTED:" + kind + "]" }

// containsFold reports whether s contains lower, an ASCII lower-case
// string, ignoring ASCII case.
func containsFold(s, lower string) bool {
	n := len(lower)
	if n == 0 {
		return true
	}
	c0 := lower[0]
	u0 := c0
	if 'a' <= c0 && c0 <= 'z' {
		u0 = c0 - 'a' + 'A'
	}
	for i := 0; i+n <= len(s); i++ {
		if c := s[i]; c != c0 && c != u0 {
			continue
		}
		if strings.EqualFold(s[i:i+n], lower) {
			return true
		}
	}
	return false
}

// scrubHeader returns the scrubbed name and value of a header: the whole
// value of a credential header is replaced, others go through Scrub.
func scrubHeader(name, value string) (string, string) {
	if kind, ok := sensitiveHeaders[strings.ToLower(strings.TrimSpace(name))]; ok {
		return Scrub(name), redaction(kind)
	}
	return Scrub(name), Scrub(value)
}
