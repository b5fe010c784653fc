package mitm

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/secret"
	"github.com/capsem/capsem/store"
)

// The secrets of a policy, as one request's host sees them. A secret is
// bound to the host (one of its hosts: its placeholder is replaced by the
// real value) or not (its placeholder is a leak); its real value coming
// from the guest is a leak wherever it goes, since the guest never had it.
//
// Needle ids in the matchers: 2i is secret i's placeholder, 2i+1 its real
// value.
type secretView struct {
	secrets []*policy.Secret
	bound   []*policy.Secret // bound to this host
	leaks   *secret.Matcher  // unbound placeholders and every real value
	reals   *secret.Matcher  // every real value: what an event must never hold

	// Of the bound secrets, made once rather than per request:
	boundReals [][]byte    // their real values, which DLP lets through here
	bodySub    [][2][]byte // (placeholder, real) of those substituted in the body (in = [… "body"])
	reflect    *secret.Scrubber
}

// maxSecrets bounds the secrets of one policy: the views are cached by a
// bit mask of the bound ones.
const maxSecrets = 64

type viewKey struct {
	pol  *policy.Policy
	mask uint64
}

// views caches secretViews by policy and mask: a matcher costs a 128 KiB
// table to build, and hosts bound alike share it. Keys of replaced
// policies stay: a reload is rare, and there are few masks.
type views struct{ byMask sync.Map }

// flowScan is what a flow's requests are checked for while the policy in
// force is pol, decided once: a flow has one host (the SNI, which Host
// must match). Looking the view up in the proxy's map for every request
// was 3 % of capsem-net's CPU at 4,000 HTTP/2 requests/s.
type flowScan struct {
	pol      *policy.Policy
	view     *secretView  // nil: no secrets
	scanner  *dlp.Scanner // nil: no DLP for this host
	head     *dlp.Scanner // the request head's: scanner but the detectors expected at this host; nil: none
	dlpBlock bool         // a DLP match refuses (else it is noted)
}

// scanFor returns the flow's flowScan for pol.
//
// A detector whose credential is expected at the flow's host ([dlp]
// expected_hosts: anthropic-key at api.anthropic.com) does not scan where
// a client sends its credential — header values and the URL's query (the
// claude CLI its key in X-Api-Key on every request, each of which was a
// dlp-match). It still scans the path and the body: a key put there at its
// provider's host is data the host keeps or shows (a file's name or a gist
// on api.github.com, a prompt to the model), not the request's credential.
func (fs *flowState) scanFor(p *Proxy, pol *policy.Policy) *flowScan {
	if c := fs.scan.Load(); c != nil && c.pol == pol {
		return c
	}
	c := &flowScan{pol: pol, view: p.secretsFor(pol, fs.sni)}
	if d := pol.DLP(); d.Action != policy.DLPOff && !d.Exempt(fs.sni) {
		c.scanner, c.dlpBlock = p.scanner(d.Detectors), d.Action == policy.DLPBlock
		c.head = c.scanner
		if exp := d.ExpectedAt(fs.sni); len(exp) > 0 {
			on := d.Detectors
			if on == nil {
				on = dlp.Detectors()
			}
			on = slices.DeleteFunc(slices.Clone(on), func(name string) bool { return slices.Contains(exp, name) })
			c.head = nil
			if len(on) > 0 {
				c.head = p.scanner(on)
			}
		}
	}
	fs.scan.Store(c)
	return c
}

// secretsFor returns the view of pol's secrets for host, nil when pol has
// none.
func (p *Proxy) secretsFor(pol *policy.Policy, host string) *secretView {
	ss := pol.Secrets()
	if len(ss) == 0 {
		return nil
	}
	var mask uint64
	for i, s := range ss[:min(len(ss), maxSecrets)] {
		if s.Binds(host) {
			mask |= 1 << i
		}
	}
	k := viewKey{pol, mask}
	v, ok := p.views.byMask.Load(k)
	if !ok {
		v, _ = p.views.byMask.LoadOrStore(k, newSecretView(ss, mask))
	}
	return v.(*secretView)
}

func newSecretView(ss []*policy.Secret, mask uint64) *secretView {
	v := &secretView{secrets: ss}
	var leaks, reals []secret.Needle
	var scrub []secret.ScrubNeedle
	for i, s := range ss {
		if s.Real() == nil {
			continue // not bound: cannot happen once the policy is Bound
		}
		if i < maxSecrets && mask&(1<<i) != 0 {
			v.bound = append(v.bound, s)
			ph := []byte(s.InForce())
			v.boundReals = append(v.boundReals, s.Real())
			if s.SubstitutesIn(policy.SecretInBody) {
				v.bodySub = append(v.bodySub, [2][]byte{ph, s.Real()})
			}
			scrub = append(scrub, secret.ScrubNeedle{ID: i, Value: s.Real(), Replacement: ph})
		} else {
			leaks = append(leaks, secret.Needle{ID: 2 * i, Value: []byte(s.InForce())})
		}
		real := secret.Needle{ID: 2*i + 1, Value: s.Real()}
		leaks = append(leaks, real)
		reals = append(reals, real)
	}
	// The policy checked the lengths (MinSecretBytes), so these cannot
	// fail; an empty matcher finds nothing, which would fail open, so a
	// failure panics rather than be ignored.
	var err error
	if v.leaks, err = secret.NewMatcher(leaks); err != nil {
		panic(err)
	}
	if v.reals, err = secret.NewMatcher(reals); err != nil {
		panic(err)
	}
	if len(scrub) > 0 {
		if v.reflect, err = secret.NewScrubber(scrub); err != nil {
			panic(err)
		}
	}
	return v
}

// leak is a secret found where it must not be.
type leak struct {
	secret *policy.Secret
	real   bool // the real value, not the placeholder
	form   secret.Form
	where  string // a header's name, "url", or "body@OFFSET"
}

func (v *secretView) leakOf(h secret.Hit, where string) *leak {
	return &leak{secret: v.secrets[h.ID/2], real: h.ID%2 == 1, form: h.Form, where: where}
}

func (l *leak) reason() string {
	if l.real {
		return ReasonSecretRealValue
	}
	return ReasonSecretWrongHost
}

// why says what was found, never the value.
func (l *leak) why(host string) string {
	if l.real {
		return fmt.Sprintf("the request carries the real value of secret %s (%s, in %s); the guest was never given it, so it can only have leaked, and capsem sends it nowhere from the guest", l.secret.Name, l.form, l.where)
	}
	return fmt.Sprintf("the request carries the placeholder of secret %s (%s, in %s), which may go only to %s, not %s", l.secret.Name, l.form, l.where, strings.Join(l.secret.Hosts, ", "), host)
}

// checkHead looks for leaks in a request's header and URL, as sent and
// with percent-encoding and Basic credentials decoded.
func (v *secretView) checkHead(r *http.Request) *leak {
	find := func(s, where string) *leak {
		if h, ok := v.leaks.FindString(s); ok {
			return v.leakOf(h, where)
		}
		if strings.IndexByte(s, '%') >= 0 {
			if d, err := url.PathUnescape(s); err == nil {
				if h, ok := v.leaks.FindString(d); ok {
					return v.leakOf(h, where)
				}
			}
		}
		return nil
	}
	for name, vals := range r.Header {
		if l := find(name, "header name"); l != nil {
			return l
		}
		for _, val := range vals {
			if l := find(val, name); l != nil {
				return l
			}
			if user, ok := basicCredentials(val); ok {
				if l := find(user, name+" (Basic, decoded)"); l != nil {
					return l
				}
			}
		}
	}
	for _, s := range []string{r.URL.EscapedPath(), r.URL.RawQuery, r.URL.Path} {
		if l := find(s, "url"); l != nil {
			return l
		}
	}
	// A placeholder is a valid DNS label: a name under an allowed wildcard
	// could carry it to the host's resolvers and the upstream.
	return find(r.Host, "host")
}

// basicCredentials decodes an Authorization value "Basic base64(user:pass)".
func basicCredentials(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// substituteHead puts the real values of the bound secrets in place of
// their placeholders where each secret's `in` says: header values (Basic
// credentials decoded and encoded again), the URL's query, its path. It
// returns how many it replaced.
func (v *secretView) substituteHead(r *http.Request) int {
	n := 0
	for _, s := range v.bound {
		ph, real := s.InForce(), string(s.Real())
		if s.SubstitutesIn(policy.SecretInHeader) {
			n += substituteHeader(r.Header, ph, real)
		}
		if s.SubstitutesIn(policy.SecretInQuery) {
			n += substituteQuery(r.URL, ph, real)
		}
		if s.SubstitutesIn(policy.SecretInPath) {
			n += substitutePath(r.URL, ph, real)
		}
	}
	return n
}

// substituteHeader replaces ph by real in h's values, raw or inside a
// Basic credential.
func substituteHeader(h http.Header, ph, real string) int {
	n := 0
	for _, vals := range h {
		for i, val := range vals {
			if c := strings.Count(val, ph); c > 0 {
				vals[i] = strings.ReplaceAll(val, ph, real)
				n += c
				continue
			}
			if cred, ok := basicCredentials(val); ok && strings.Contains(cred, ph) {
				n += strings.Count(cred, ph)
				scheme, _, _ := strings.Cut(strings.TrimSpace(val), " ")
				vals[i] = scheme + " " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(cred, ph, real)))
			}
		}
	}
	return n
}

// substituteQuery replaces ph in u's query, raw or percent-encoded byte by
// byte, by real escaped for a query.
func substituteQuery(u *url.URL, ph, real string) int {
	n := 0
	// The query is looked at only when it may hold a form of ph: building
	// the percent-encoded forms for every request was half the cost of
	// the substitution (bench:mitm profile).
	if q := u.RawQuery; strings.Contains(q, ph) || strings.IndexByte(q, '%') >= 0 {
		for _, form := range []string{ph, secret.PercentEncode(ph, true), secret.PercentEncode(ph, false)} {
			if c := strings.Count(u.RawQuery, form); c > 0 {
				u.RawQuery = strings.ReplaceAll(u.RawQuery, form, url.QueryEscape(real))
				n += c
			}
		}
	}
	return n
}

// substitutePath replaces ph in u's path, raw or percent-encoded.
func substitutePath(u *url.URL, ph, real string) int {
	c := strings.Count(u.Path, ph)
	if c > 0 {
		// Path is the decoded path: a placeholder percent-encoded in the
		// request is plain here. RawPath is rebuilt from it.
		u.Path = strings.ReplaceAll(u.Path, ph, real)
		u.RawPath = ""
	}
	return c
}

// redact returns s with every form of every real value replaced by a
// redaction naming its secret: what an event holds where the guest sent a
// real value.
func (v *secretView) redact(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	for {
		h, ok := v.reals.Find(b)
		if !ok {
			return string(b)
		}
		end := h.Offset + int64(h.Len)
		b = append(append(append([]byte{}, b[:h.Offset]...), "[REDACTED:secret "+v.secrets[h.ID/2].Name+"]"...), b[end:]...)
	}
}

// redactEvent removes every form of every real value from what the event
// stores: the guest sent one (a leak), or a preview caught it.
func (ex *exchange) redactEvent() {
	v, e := ex.view, &ex.ev
	e.Path, e.Query, e.Detail = v.redact(e.Path), v.redact(e.Query), v.redact(e.Detail)
	e.RequestBodyPreview, e.ResponseBodyPreview = v.redact(e.RequestBodyPreview), v.redact(e.ResponseBodyPreview)
	for _, hs := range [][]store.Header{e.RequestHeaders, e.ResponseHeaders} {
		for i := range hs {
			hs[i].Name, hs[i].Value = v.redact(hs[i].Name), v.redact(hs[i].Value)
		}
	}
}
