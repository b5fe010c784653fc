package dlp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
)

// The detectors, by index into detectorNames. Their names are a contract
// (policies name them, the MITM reports them, Scrub redacts with them):
// they are defined here once and nowhere else.
const (
	dAWSAccessKey = iota
	dAWSSecretKey
	dGitHubToken
	dAnthropicKey
	dOpenAIKey
	dGoogleAPIKey
	dSlackToken
	dStripeKey
	dPrivateKey
	dJWT
	nDetectors
)

var detectorNames = [nDetectors]string{
	dAWSAccessKey: "aws-access-key",
	dAWSSecretKey: "aws-secret-key",
	dGitHubToken:  "github-token",
	dAnthropicKey: "anthropic-key",
	dOpenAIKey:    "openai-key",
	dGoogleAPIKey: "google-api-key",
	dSlackToken:   "slack-token",
	dStripeKey:    "stripe-key",
	dPrivateKey:   "private-key",
	dJWT:          "jwt",
}

// Detectors returns the names of all the detectors.
func Detectors() []string { return slices.Clone(detectorNames[:]) }

// Byte classes, one bit each in cls.
const (
	cRun    = 1 << iota // [A-Za-z0-9_+/-]: every match but a PEM header starts with minRun of these
	cV                  // [A-Za-z0-9+/]: an AWS secret access key
	cWord               // [A-Za-z0-9_]: what \b separates
	cB64URL             // [A-Za-z0-9_-]
	cAlnum              // [A-Za-z0-9]
	cUpNum              // [A-Z0-9]
	cSlack              // [A-Za-z0-9-]
	cFirst              // the first byte of a token prefix
)

var cls = func() (t [256]uint8) {
	set := func(bits uint8, chars string) {
		for i := 0; i < len(chars); i++ {
			t[chars[i]] |= bits
		}
	}
	const up, low, dig = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz", "0123456789"
	set(cRun|cV|cWord|cB64URL|cAlnum|cSlack, up+low+dig)
	set(cUpNum, up+dig)
	set(cRun|cWord|cB64URL, "_")
	set(cRun|cB64URL|cSlack, "-")
	set(cRun|cV, "+/")
	for _, r := range tokenRules {
		t[r.prefix[0]] |= cFirst
	}
	t['e'] |= cFirst // a JWT's "eyJ"
	return t
}()

// minRun is the fewest bytes of class cRun every match but a PEM header
// starts with (an AWS access key id is 20, a JWT's header segment at
// least 20: {"alg":"HS256"} encodes to 20). The scanner skips text that
// holds no run that long without looking at most of its bytes: the longer
// minRun, the faster (BenchmarkStream/text, 256 KiB writes of JSON-ish
// text on a 2-core EPYC: 1.2-1.4 GB/s with 16, 1.4-1.55 GB/s with 20).
const minRun = 20

// A tokenRule is a literal prefix followed by a tail of one byte class: a
// match starts at a word boundary (or, for a rule marked anywhere, at any
// byte), and its tail is exactly min bytes followed by no word byte
// (exact), or at least min bytes, as many as there are (up to the scan's
// cap).
type tokenRule struct {
	det    int
	prefix string
	tail   uint8 // the class of the tail's bytes
	min    int
	exact  bool
	ok     func(tail []byte) bool // a further check of the tail, or nil
	// anywhere: the prefix is distinctive enough to be taken also glued
	// to a word before it ("xghp_…", "aAKIA…", "key_sk-ant-…"), which
	// a guest otherwise writes to pass the scan. Each says why it is.
	anywhere bool
}

// sep is the index in r's prefix of its first byte that is no letter or
// digit (where the scanner stops in a run), -1 when it has none (then a
// rule taken anywhere is exact, and its match ends where letters and
// digits do).
func (r *tokenRule) sep() int {
	for k := 0; k < len(r.prefix); k++ {
		if cls[r.prefix[k]]&cAlnum == 0 {
			return k
		}
	}
	return -1
}

// tokenRules are tried in order at a position; the first that matches
// wins. Every prefix plus min is at least minRun.
//
// A prefix is taken anywhere when glued text holding it by chance is rare
// enough: in ordinary text it is no part of a word, and in random text
// (base64 of an image sent to a model, a hash) what follows it rarely has
// the tail's shape. Not anywhere: ACCA (four hex digits: an upper-case
// hex digest holds it followed by 16 more and its end once in 65,536),
// AIza (four letters: standard base64 holds it, 35 more of the tail's
// class and a '+' or '/' about once in 1.6e9 bytes, 32 times as often as
// after a '+' or '/'), the sk-/sk_/rk_ prefixes of OpenAI and Stripe (the
// ends of task-, disk_, work_: "task_test_shouldReturnAnError…" is a
// test's name).
var tokenRules = []tokenRule{
	// gitleaks: \b(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b. AKIA, ASIA and
	// ABIA hold a letter no hex digit is, and the match is exactly 20
	// upper-case letters and digits ending where the word does: in
	// random base64 once in 5e12 bytes.
	{det: dAWSAccessKey, prefix: "AKIA", tail: cUpNum, min: 16, exact: true, anywhere: true},
	{det: dAWSAccessKey, prefix: "ASIA", tail: cUpNum, min: 16, exact: true, anywhere: true},
	{det: dAWSAccessKey, prefix: "ABIA", tail: cUpNum, min: 16, exact: true, anywhere: true},
	{det: dAWSAccessKey, prefix: "ACCA", tail: cUpNum, min: 16, exact: true},
	// AIza and 35 more, not followed by more of them.
	{det: dGoogleAPIKey, prefix: "AIza", tail: cB64URL, min: 35, exact: true},
	// Classic tokens are 36 after the prefix (30 random, 6 checksum);
	// fine-grained ones (github_pat_) 82, 22 at least by gitleaks, whose
	// first 22 are letters and digits ("11A…"): a tail with no run of 16
	// of them holding a digit is a name (load_github_pat_from_env). The
	// '_' keeps these out of standard base64 and hex; in ordinary text
	// "gh" then one of p, o, s, u, r and '_' is no part of a word, and
	// 36 letters and digits after it no identifier's. Random base64url
	// holds one about once in 9 MiB (7 in 64 MiB; 2 when taken at a word
	// start only), a price for finding the token a guest glues to a word.
	{det: dGitHubToken, prefix: "ghp_", tail: cAlnum, min: 36, anywhere: true},
	{det: dGitHubToken, prefix: "gho_", tail: cAlnum, min: 36, anywhere: true},
	{det: dGitHubToken, prefix: "ghs_", tail: cAlnum, min: 36, anywhere: true},
	{det: dGitHubToken, prefix: "ghu_", tail: cAlnum, min: 36, anywhere: true},
	{det: dGitHubToken, prefix: "ghr_", tail: cAlnum, min: 36, anywhere: true},
	{det: dGitHubToken, prefix: "github_pat_", tail: cWord, min: 22, ok: alnumDigitRun, anywhere: true},
	// sk-ant-api03-… is 108 bytes; 13 is the least that makes minRun,
	// so that a key cut by a DNS label (sk-ant-api03-xxxxxx.evil.test)
	// still counts. Seven bytes with two '-': no word holds them.
	{det: dAnthropicKey, prefix: "sk-ant-", tail: cB64URL, min: 13, anywhere: true},
	// sk-… (48 letters and digits), sk-proj-…, sk-svcacct-…, and the sk-
	// keys of OpenAI-compatible APIs; not sk-ant-, and not a slug such as
	// sk-learn-tutorial-basics: the tail holds 16 letters and digits in a
	// row, one of them a digit.
	{det: dOpenAIKey, prefix: "sk-", tail: cB64URL, min: 20, ok: openAITail},
	// Stripe secret and restricted keys, live and test: both are
	// credentials (gitleaks flags test keys too).
	{det: dStripeKey, prefix: "sk_live_", tail: cAlnum, min: 24},
	{det: dStripeKey, prefix: "rk_live_", tail: cAlnum, min: 24},
	{det: dStripeKey, prefix: "sk_test_", tail: cAlnum, min: 24},
	{det: dStripeKey, prefix: "rk_test_", tail: cAlnum, min: 24},
	// "xox", a letter and '-': no word, and no base64 (the '-') or hex.
	{det: dSlackToken, prefix: "xoxb-", tail: cSlack, min: 15, anywhere: true},
	{det: dSlackToken, prefix: "xoxa-", tail: cSlack, min: 15, anywhere: true},
	{det: dSlackToken, prefix: "xoxp-", tail: cSlack, min: 15, anywhere: true},
	{det: dSlackToken, prefix: "xoxr-", tail: cSlack, min: 15, anywhere: true},
	{det: dSlackToken, prefix: "xoxs-", tail: cSlack, min: 15, anywhere: true},
}

func openAITail(t []byte) bool {
	return !bytes.HasPrefix(t, []byte("ant-")) && alnumDigitRun(t)
}

// alnumDigitRun reports whether t holds 16 letters and digits in a row,
// one of them a digit: the random part of a key, not a slug or a name.
func alnumDigitRun(t []byte) bool {
	n, digit := 0, false
	for _, c := range t {
		isDigit := '0' <= c && c <= '9'
		if !isDigit && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') { // not cls: it refers to tokenRules
			n, digit = 0, false
			continue
		}
		n++
		digit = digit || isDigit
		if n >= 16 && digit {
			return true
		}
	}
	return false
}

// Bounds of what a detector looks at past a match's start.
const (
	// MaxValue is the most of a match a Match holds (and the most the
	// scanner looks ahead to find where a token ends): a longer JWT or
	// token is reported by its first MaxValue bytes.
	MaxValue = 512
	// jwtMax is the longest a JWT's header, payload and first 16 bytes
	// of signature may be and still count.
	jwtMax = 8 << 10
	// pemMax is the longest "-----BEGIN … PRIVATE KEY-----" line counts
	// ("-----BEGIN ENCRYPTED PRIVATE KEY-----" is 37).
	pemMax = 96
	// awsSecretLen is the length of an AWS secret access key; awsContext
	// is how far before it the scanner looks for its keywords.
	awsSecretLen = 40
	awsContext   = 64
	// jwtMinHeader and jwtMinSig are the shortest header segment and
	// signature a JWT is taken for.
	jwtMinHeader = minRun
	jwtMinSig    = 16
)

// A verdict on a position: a match ends at end, or no match starts
// there, or the bytes seen so far do not tell.
type verdict uint8

const (
	no verdict = iota
	yes
	more
)

// window is what a detector sees: b; final when nothing follows b; cap
// the most of a match to return.
type window struct {
	b     []byte
	final bool
	cap   int
}

// short is the verdict when a check needs a byte past the end of b.
func (w *window) short() verdict {
	if w.final {
		return no
	}
	return more
}

// literal reports whether b holds lit at i.
func (w *window) literal(i int, lit string) verdict {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(w.b) {
			return w.short()
		}
		if w.b[i+k] != lit[k] {
			return no
		}
	}
	return yes
}

func (w *window) token(i int, r *tokenRule) (int, verdict) {
	if v := w.literal(i, r.prefix); v != yes {
		return 0, v
	}
	b := w.b
	n := len(b)
	start := i + len(r.prefix)
	j := start
	if r.exact {
		for end := start + r.min; j < end; j++ {
			if j >= n {
				return 0, w.short()
			}
			if cls[b[j]]&r.tail == 0 {
				return 0, no
			}
		}
		if j < n {
			if cls[b[j]]&(r.tail|cWord) != 0 {
				return 0, no
			}
		} else if !w.final {
			return 0, more
		}
		return j, yes
	}
	lim := i + w.cap
	for j < n && j < lim && cls[b[j]]&r.tail != 0 {
		j++
	}
	if j == n && j < lim && !w.final {
		return 0, more
	}
	if j-start < r.min || r.ok != nil && !r.ok(b[start:j]) {
		return 0, no
	}
	return j, yes
}

// jwt checks for eyJ<header>.eyJ<payload>.<signature> at i (which holds
// "eyJ"): base64url segments, the first two JSON objects, the header at
// least jwtMinHeader and the signature jwtMinSig bytes, all of it within
// jwtMax.
func (w *window) jwt(i int) (int, verdict) {
	b := w.b
	n := len(b)
	lim := min(i+jwtMax, n)
	seg := func(j int) int {
		for j < lim && cls[b[j]]&cB64URL != 0 {
			j++
		}
		return j
	}
	h := seg(i)
	if h == n && !w.final {
		return 0, more
	}
	if h-i < jwtMinHeader || h >= lim || b[h] != '.' {
		return 0, no
	}
	p0 := h + 1
	if p0+3 > lim && lim < n {
		return 0, no
	}
	if v := w.literal(p0, "eyJ"); v != yes {
		return 0, v
	}
	p := seg(p0)
	if p == n && !w.final {
		return 0, more
	}
	if p >= lim || b[p] != '.' {
		return 0, no
	}
	s0 := p + 1
	s := seg(s0)
	if s-s0 < jwtMinSig {
		if s == n && !w.final {
			return 0, more
		}
		return 0, no
	}
	if !jsonObject(b[i:h]) || !jsonObject(b[p0:p]) {
		return 0, no
	}
	// The minimal form is seen; the match runs on to the signature's end
	// or cap, whichever comes first.
	end := s0 + jwtMinSig
	capEnd := i + w.cap
	for end < n && end < capEnd && cls[b[end]]&cB64URL != 0 {
		end++
	}
	if end == n && end < capEnd && !w.final {
		return 0, more
	}
	return min(end, capEnd), yes
}

func jsonObject(seg []byte) bool {
	dst := make([]byte, base64.RawURLEncoding.DecodedLen(len(seg)))
	n, err := base64.RawURLEncoding.Decode(dst, seg)
	if err != nil {
		return false
	}
	dst = bytes.TrimSpace(dst[:n])
	return len(dst) > 1 && dst[0] == '{' && json.Valid(dst)
}

const pemBegin = "-----BEGIN"

// pem checks for a "-----BEGIN[ A-Z0-9]*PRIVATE KEY-----" line at i
// (which holds pemBegin): the header is the match, the key after it is
// not needed.
func (w *window) pem(i int) (int, verdict) {
	b := w.b
	n := len(b)
	j := i + len(pemBegin)
	lim := i + pemMax
	for j < n && j < lim && (b[j] == ' ' || cls[b[j]]&cUpNum != 0) {
		j++
	}
	if j == n && !w.final {
		return 0, more
	}
	if !bytes.HasSuffix(b[i+len(pemBegin):j], []byte("PRIVATE KEY")) {
		return 0, no
	}
	if v := w.literal(j, "-----"); v != yes {
		return 0, v
	}
	return j + 5, yes
}

// awsSecret checks the keywords before an AWS secret access key candidate
// at i (40 bytes of class cV, no more on either side): within awsContext
// bytes before it, on its line and after any ']' (so that Scrub's
// "[REDACTED:aws-secret-key]" is no keyword), "secret" and "aws" or
// "access", in any case (aws_secret_access_key, AWS_SECRET_ACCESS_KEY,
// SecretAccessKey, "aws secret").
func (w *window) awsSecret(i int) bool {
	ctx := w.b[max(0, i-awsContext):i]
	if k := bytes.LastIndexAny(ctx, "\n]"); k >= 0 {
		ctx = ctx[k+1:]
	}
	var lower [awsContext]byte
	l := lower[:len(ctx)]
	for k, c := range ctx {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		l[k] = c
	}
	return bytes.Contains(l, []byte("secret")) &&
		(bytes.Contains(l, []byte("aws")) || bytes.Contains(l, []byte("access")))
}
