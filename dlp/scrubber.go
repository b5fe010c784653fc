package dlp

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// A Scrubber is Scrub that also knows one session's placeholders: a
// placeholder the policy fixed (placeholder = "…" in a [[secret]]) has no
// prefix Scrub could know it by, and an export must not carry it (a
// reader could tie the export to the session's secret, and a fixture
// would publish it). A nil *Scrubber scrubs as the package's functions do.
type Scrubber struct {
	// forms are the placeholders as they may be written, in lower case:
	// as they are, and percent-encoded for a query or a path. Longest
	// first, so that a form that holds another is taken whole.
	forms []string
}

// placeholderKind is the redaction of a placeholder, generated or fixed.
const placeholderKind = "secret-placeholder"

// NewScrubber returns a Scrubber for the placeholders given; nil when
// there are none. Those Scrub redacts whole already (the ones capsem
// makes, one per secret and session) and "" are left out: an export of
// many sessions has one of those each.
func NewScrubber(placeholders []string) *Scrubber {
	var forms []string
	for _, p := range placeholders {
		if p == "" || Scrub(p) == Redaction(placeholderKind) {
			continue
		}
		for _, f := range []string{p, url.QueryEscape(p), url.PathEscape(p)} {
			forms = append(forms, asciiLower(f))
		}
	}
	if len(forms) == 0 {
		return nil
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return &Scrubber{forms: slices.Compact(forms)}
}

// Scrub returns Scrub(s) with each placeholder, in any of its forms and
// in any case (a DNS name is lower-cased), replaced by
// "[REDACTED:secret-placeholder]".
func (sc *Scrubber) Scrub(s string) string { return Scrub(sc.placeholders(s)) }

// ScrubHeader is ScrubHeader with the placeholders redacted.
func (sc *Scrubber) ScrubHeader(name, value string) (string, string) {
	return ScrubHeader(sc.placeholders(name), sc.placeholders(value))
}

// ScrubArgv is ScrubArgv with the placeholders redacted in each word (a
// placeholder holds no space: it is within one).
func (sc *Scrubber) ScrubArgv(words []string) []string {
	if sc != nil {
		words = slices.Clone(words)
		for i, w := range words {
			words[i] = sc.placeholders(w)
		}
	}
	return ScrubArgv(words)
}

// placeholders replaces the placeholders in s, but not within a
// redaction already there ("[REDACTED:secret-placeholder]" holds a
// placeholder "secret-placeholder" a policy may fix): Scrub stays
// idempotent.
func (sc *Scrubber) placeholders(s string) string {
	if sc == nil || s == "" {
		return s
	}
	lower := asciiLower(s)
	for _, f := range sc.forms {
		if !strings.Contains(lower, f) {
			continue
		}
		done := redactions.FindAllStringIndex(s, -1)
		var b strings.Builder
		last := 0
		for from := 0; ; {
			k := strings.Index(lower[from:], f)
			if k < 0 {
				break
			}
			k += from
			from = k + len(f)
			if slices.ContainsFunc(done, func(r []int) bool { return r[0] <= k && from <= r[1] }) {
				continue
			}
			b.WriteString(s[last:k])
			b.WriteString(Redaction(placeholderKind))
			last = from
		}
		if last == 0 {
			continue
		}
		b.WriteString(s[last:])
		s = b.String()
		lower = asciiLower(s)
	}
	return s
}

// redactions finds what Redaction wrote.
var redactions = regexp.MustCompile(`\[REDACTED:[a-z0-9-]+\]`)

// asciiLower lower-cases the ASCII letters of s only, so that an offset in
// it is one in s (strings.ToLower changes the length of some runes and of invalid UTF-8).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
