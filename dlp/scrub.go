package dlp

import (
	"regexp"
	"slices"
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
				return sm[1] + sm[4] + Redaction(kind)
			}
			return sm[1] + sm[2] + Redaction(kind)
		})
	}
	if r.keep == 0 {
		return r.re.ReplaceAllLiteralString(s, Redaction(r.kind))
	}
	return r.re.ReplaceAllString(s, "${1}"+Redaction(r.kind))
}

// Redaction is what Scrub puts in place of a secret of kind.
func Redaction(kind string) string { return "[REDACTED:" + kind + "]" }

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

// ScrubHeader returns the scrubbed name and value of a header: the whole
// value of a credential header is replaced, others go through Scrub.
func ScrubHeader(name, value string) (string, string) {
	if kind, ok := sensitiveHeaders[strings.ToLower(strings.TrimSpace(name))]; ok {
		return Scrub(name), Redaction(kind)
	}
	return Scrub(name), Scrub(value)
}

// ScrubArgv returns the words of a command line scrubbed: each word goes
// through Scrub, and a secret that spans words — "Authorization:" "Bearer"
// "tok…", a private key passed a line per word — is found in the words
// joined with spaces (as a shell shows them); the words such a secret
// reaches are replaced whole by its redaction. A match that starts inside
// one word and is redacted there by Scrub of that word is left to it: a
// header written as one word ("Authorization: Bearer tok…") does not take
// the words after it along, unless all it holds after the colon is a
// scheme ("Authorization: Basic" "dXNl…"), when the value goes on in the
// next words.
func ScrubArgv(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Scrub(w)
	}
	if len(words) < 2 {
		return out
	}
	line := strings.Join(words, " ")
	// ends[i] is the offset just past word i; the space after a word
	// counts as part of it.
	ends := make([]int, len(words))
	off := 0
	for i, w := range words {
		off += len(w) + 1
		ends[i] = off
	}
	wordAt := func(pos int) int {
		i, _ := slices.BinarySearch(ends, pos+1)
		return i
	}
	done := make([]bool, len(words)) // redacted whole, by an earlier rule
	for i := range secretRules {
		r := &secretRules[i]
		if !r.triggered(line) {
			continue
		}
		for p := 0; p < len(line); {
			m := r.re.FindStringSubmatchIndex(line[p:])
			if m == nil {
				break
			}
			for j := range m {
				if m[j] >= 0 {
					m[j] += p
				}
			}
			p = max(m[1], p+1)
			first := wordAt(m[0])
			if first == wordAt(m[1]-1) {
				continue // within one word
			}
			lo, hi, kind := r.secret(line, m)
			if hi <= lo {
				continue
			}
			from, to := wordAt(lo), wordAt(hi-1)
			if r.kind == "header" && from == first {
				// The value starts in the name's word: it goes on only
				// if that word holds no more of it than a scheme.
				// Otherwise the match is that word's, and the words
				// after it are searched on their own.
				if !authScheme.MatchString(line[lo : ends[first]-1]) {
					p = ends[first]
					continue
				}
				from++
			}
			for w := from; w <= to; w++ {
				if !done[w] {
					out[w], done[w] = Redaction(kind), true
				}
			}
		}
	}
	return out
}

// authScheme is the start of a credential header's value that needs more:
// an authentication scheme and nothing else ("Basic", "Bearer", any word
// of letters, or AWS's signature scheme).
var authScheme = regexp.MustCompile(`(?i)^[ \t]*(?:[a-z]+|aws4-hmac-sha256)[ \t]*$`)

// secret returns the span of a match m of r in s that Scrub replaces (the
// match without what Scrub keeps) and the kind of its redaction.
func (r *secretRule) secret(s string, m []int) (lo, hi int, kind string) {
	if r.kind == "header" {
		// 1 name; 2 ":" separator and 3 value; or 4 "=" and 5 value.
		kind = sensitiveHeaders[strings.ToLower(s[m[2]:m[3]])]
		if m[6] >= 0 {
			return m[6], m[7], kind
		}
		return m[10], m[11], kind
	}
	if r.keep > 0 {
		return m[2*r.keep+2], m[2*r.keep+3], r.kind
	}
	return m[0], m[1], r.kind
}
