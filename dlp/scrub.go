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
// A rule with find instead of re is a Scanner's: its kinds are the
// detectors' names.
type secretRule struct {
	kind     string
	re       *regexp.Regexp
	keep     int  // leading submatches kept verbatim
	fold     bool // triggers are matched case-insensitively (given in lower case)
	triggers []string
	find     func(s string) []span
}

// A span is a match of a rule in a text: [m0, m1) the whole match, [lo,
// hi) the secret in it, redacted as kind.
type span struct {
	m0, m1, lo, hi int
	kind           string
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

// The scanners Scrub finds PEM headers and tokens with.
var (
	pemScanner   = mustScanner("private-key")
	tokenScanner = mustScanner(slices.DeleteFunc(Detectors(), func(d string) bool { return d == "private-key" })...)
)

func mustScanner(detectors ...string) *Scanner {
	s, err := NewScanner(detectors)
	if err != nil {
		panic(err)
	}
	return s
}

// spans are the matches of sc in s that do not overlap an earlier one,
// each running to extend(the end of its value).
func spans(sc *Scanner, s string, extend func(end int) int) []span {
	var out []span
	last := 0
	for _, m := range sc.scanAll(s) {
		start := int(m.Offset)
		if start < last {
			continue
		}
		end := extend(start + len(m.Value))
		out = append(out, span{start, end, start, end, m.Detector})
		last = end
	}
	return out
}

// pemRest is the rest of a PEM private key block after its header: to
// its END line, or, cut off by a preview limit, to the end of the text.
var pemRest = regexp.MustCompile(`^(?s:.*?)(?:-----END[ A-Z0-9]*PRIVATE KEY-----|\z)`)

// The rules, in the order they apply. Header-shaped text comes first so
// that "Authorization: Bearer sk-…" becomes one redaction; the token rules
// then catch keys wherever else they appear. A replacement never matches
// any rule, so Scrub(Scrub(s)) == Scrub(s).
var secretRules = []secretRule{
	{
		// A PEM private key block.
		triggers: []string{pemBegin},
		find: func(s string) []span {
			return spans(pemScanner, s, func(end int) int { return end + pemRest.FindStringIndex(s[end:])[1] })
		},
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
		// The placeholders capsem gives a guest for its secrets: not a
		// credential, but what a reader of an export must not be able to
		// tie to a session's secret.
		kind:     placeholderKind,
		re:       regexp.MustCompile(regexp.QuoteMeta(PlaceholderPrefix) + `[0-9a-f]{32}`),
		triggers: []string{PlaceholderPrefix},
	},
	{
		kind:     "bearer",
		re:       regexp.MustCompile(`(?i)\b(bearer[ \t]+)([A-Za-z0-9\-._~+/]{8,}=*)`),
		keep:     1,
		fold:     true,
		triggers: []string{"bearer"},
	},
	{
		// The tokens of the Scanner's detectors, whole (not cut at
		// MaxValue).
		find: func(s string) []span {
			return spans(tokenScanner, s, func(end int) int { return end })
		},
	},
}

// PlaceholderPrefix starts every placeholder capsem makes for a secret
// (32 random hex digits follow). Scrub redacts such placeholders; the
// policy makes them.
const PlaceholderPrefix = "capsem-secret-"

// Scrub returns s with every secret it recognises replaced by
// "[REDACTED:<kind>]": what the detectors find (the kind is the
// detector's name; a private key's whole PEM block goes), capsem's secret
// placeholders ("secret-placeholder"), the values of
// Authorization, Proxy-Authorization, X-Api-Key, Cookie and Set-Cookie
// written as header lines, JSON members or parameters, and Bearer
// tokens. Text without any of those is returned as is. Scrub is
// idempotent.
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
	if r.find != nil && r.triggers == nil {
		return true
	}
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
	spans := r.spans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.lo])
		b.WriteString(Redaction(sp.kind))
		last = sp.hi
	}
	b.WriteString(s[last:])
	return b.String()
}

// spans returns the matches of r in s, left to right, none overlapping.
func (r *secretRule) spans(s string) []span {
	if r.find != nil {
		return r.find(s)
	}
	var out []span
	for _, m := range r.re.FindAllStringSubmatchIndex(s, -1) {
		lo, hi, kind := r.secret(s, m)
		out = append(out, span{m[0], m[1], lo, hi, kind})
	}
	return out
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
		next := r.iter(line)
		for p := 0; p < len(line); {
			sp, ok := next(p)
			if !ok {
				break
			}
			p = max(sp.m1, p+1)
			lo, hi, kind := sp.lo, sp.hi, sp.kind
			if hi <= lo {
				continue
			}
			first := wordAt(sp.m0)
			if first == wordAt(sp.m1-1) {
				// Within one word: Scrub of the word redacted it,
				// unless what makes it a secret is in the words
				// before (an AWS secret key after its keyword).
				if !done[first] && strings.Contains(out[first], line[lo:hi]) {
					out[first], done[first] = Redaction(kind), true
				}
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

// iter returns a function that returns the first match of r in s at or
// after p (a rule's regexp is run on s[p:], as a fresh search).
func (r *secretRule) iter(s string) func(p int) (span, bool) {
	if r.find != nil {
		spans := r.find(s)
		return func(p int) (span, bool) {
			for len(spans) > 0 && spans[0].m0 < p {
				spans = spans[1:]
			}
			if len(spans) == 0 {
				return span{}, false
			}
			return spans[0], true
		}
	}
	return func(p int) (span, bool) {
		m := r.re.FindStringSubmatchIndex(s[p:])
		if m == nil {
			return span{}, false
		}
		for j := range m {
			if m[j] >= 0 {
				m[j] += p
			}
		}
		lo, hi, kind := r.secret(s, m)
		return span{m[0], m[1], lo, hi, kind}, true
	}
}

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
