package mitm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// MaxBufferedBody is the largest request body (by its Content-Length) the
// guard reads whole before forwarding: a leak in it is refused before a
// byte goes upstream, and a body whose placeholders were replaced keeps an
// exact Content-Length. Larger bodies and bodies of unknown length are
// streamed through the guard; one that is rewritten loses its
// Content-Length (chunked over HTTP/1.1).
const MaxBufferedBody = 1 << 20

// guard applies the secrets and the DLP scan to a request the policy
// allowed: it refuses a leak or (block) a credential in the header or URL,
// puts the bound secrets' real values in, and wraps the body. It returns
// false when it answered the guest itself.
func (ex *exchange) guard(w http.ResponseWriter, r *http.Request, host string) bool {
	pol := ex.pol
	ex.view = ex.fs.secretsFor(ex.p, pol, host)
	d := pol.DLP()
	var scanner *dlp.Scanner
	if d.Action != policy.DLPOff && !d.Exempt(host) {
		scanner = ex.p.scanner(d)
	}
	if ex.view == nil && scanner == nil {
		return true
	}
	if ex.view != nil {
		if l := ex.view.checkHead(r); l != nil {
			ex.refuseLeak(w, l)
			return false
		}
	}
	exempt := ex.exemptValues()
	if scanner != nil {
		for _, f := range headScanFields(r) {
			for _, m := range scanner.ScanString(f[1]) {
				if !exemptValue(exempt, m.Value) && ex.dlpMatch(m.Detector, f[0]) && d.Action == policy.DLPBlock {
					ex.refuseDLP(w, m.Detector, f[0])
					return false
				}
			}
		}
	}
	var pairs [][2][]byte
	if ex.view != nil && len(ex.view.bound) > 0 {
		if n := ex.view.substituteHead(r); n > 0 {
			ex.note(fmt.Sprintf("placeholders replaced in the header or URL: %d", n))
		}
		if ae := r.Header.Get("Accept-Encoding"); ae != "" && ae != "identity" {
			r.Header.Set("Accept-Encoding", "identity")
			ex.note("asked for an uncoded response (Accept-Encoding: identity), so that a reflected secret can be scrubbed from it")
		}
		for _, s := range ex.view.bound {
			pairs = append(pairs, [2][]byte{[]byte(s.InForce()), s.Real()})
		}
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true // nothing to scan (an HTTP/2 request without DATA has a Body that is empty)
	}
	g := &bodyGuard{src: r.Body, view: ex.view, exempt: exempt, dlpBlock: d.Action == policy.DLPBlock, bufSize: bufFor(r.ContentLength)}
	if ex.view != nil {
		g.leaks = ex.view.leaks.Stream()
	}
	if scanner != nil {
		g.dlp = scanner.Stream()
	}
	if pairs != nil {
		g.reps = chainReplacers(guardSink{g}, pairs)
	}
	g.onLeak = func(l *leak, _ int64) {
		ex.markLeak(l)
		ex.cancel()
	}
	// A trailer arrives with the end of the body: it is checked like the
	// header before the body's end is passed on, so that a refused
	// trailer never reaches the upstream.
	g.atEOF = func() bool {
		if len(r.Trailer) == 0 {
			return false
		}
		t := &http.Request{Header: r.Trailer, URL: &url.URL{}}
		if ex.view != nil {
			if l := ex.view.checkHead(t); l != nil {
				l.where = "trailer " + l.where
				ex.markLeak(l)
				ex.cancel()
				return true
			}
		}
		if scanner != nil {
			for _, f := range headScanFields(t) {
				for _, m := range scanner.ScanString(f[1]) {
					if !exemptValue(exempt, m.Value) && ex.dlpMatch(m.Detector, "trailer "+f[0]) && g.dlpBlock {
						ex.markDLP(m.Detector, "trailer "+f[0])
						ex.cancel()
						return true
					}
				}
			}
		}
		return false
	}
	g.onDLP = func(m dlp.Match) bool {
		where := "body@" + strconv.FormatInt(m.Offset, 10)
		if ex.dlpMatch(m.Detector, where) && g.dlpBlock {
			ex.markDLP(m.Detector, where)
			ex.cancel()
			return true
		}
		return false
	}
	var body io.ReadCloser = g
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		cg, err := newCodedGuard(r.Body, ce, g)
		if err != nil {
			ex.note("the request body has Content-Encoding " + ce + ", which capsem cannot decode: it was neither scanned for secrets and credentials nor rewritten")
			ex.unscanned()
			return true
		}
		ex.note("the request body has Content-Encoding " + ce + ": it was scanned decoded, and not rewritten")
		body, pairs = cg, nil
	}
	if r.ContentLength >= 0 && r.ContentLength <= MaxBufferedBody {
		body, err := io.ReadAll(body)
		switch {
		case err == errRefusedBody:
			ex.answerRefusal(w)
			return false
		case err != nil:
			ex.refuse(w, http.StatusBadRequest, ReasonUpstreamError, "reading the request body: "+err.Error(), "Send the request again.")
			ex.ev.Decision = store.Allowed
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Content-Length")
		return true
	}
	r.Body = body
	if pairs != nil {
		r.ContentLength = -1
		r.Header.Del("Content-Length")
	}
	return true
}

// headScanFields are the parts of a request head DLP scans, with where
// each is: header values by name, and the URL.
func headScanFields(r *http.Request) [][2]string {
	var out [][2]string
	for name, vals := range r.Header {
		for _, v := range vals {
			out = append(out, [2]string{name, v})
		}
	}
	u := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	return append(out, [2]string{"url", u})
}

// exemptValues are the real values DLP lets through: those of the secrets
// bound to this request's host (where they belong).
func (ex *exchange) exemptValues() [][]byte {
	if ex.view == nil {
		return nil
	}
	var out [][]byte
	for _, s := range ex.view.bound {
		out = append(out, s.Real())
	}
	return out
}

func exemptValue(exempt [][]byte, v []byte) bool {
	for _, e := range exempt {
		if bytes.Equal(e, v) {
			return true
		}
	}
	return false
}

// findings are what the guard found, written from whichever goroutine
// reads the body (the upstream writer's, for a streamed one) and applied
// to the event when it is recorded.
type findings struct {
	mu          sync.Mutex
	refused     string // the reason of a refusal, "" when none
	refusedWhy  string
	refusedRule string
	dlpRule     string   // the first DLP match, detector@where
	dlpMore     []string // the others
	// mayHoldReal: a body went unscanned or unscrubbed (a content coding
	// capsem cannot decode, a coded response from a bound host), so the
	// previews may hold a real value.
	mayHoldReal bool
}

// unscanned notes that a body was not scanned or scrubbed: the event is
// redacted before it is stored.
func (ex *exchange) unscanned() {
	ex.found.mu.Lock()
	ex.found.mayHoldReal = true
	ex.found.mu.Unlock()
}

// dlpMatch notes a DLP match; it returns true (the match counts).
func (ex *exchange) dlpMatch(detector, where string) bool {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	rule := detector + "@" + where
	if f.dlpRule == "" {
		f.dlpRule = rule
	} else if len(f.dlpMore) < 16 {
		f.dlpMore = append(f.dlpMore, rule)
	}
	return true
}

// markLeak records a leak as the exchange's refusal (the first one wins).
func (ex *exchange) markLeak(l *leak) {
	ex.markRefused(l.reason(), l.why(ex.fs.sni), l.secret.Name)
}

// markDLP records a blocking DLP match as the exchange's refusal.
func (ex *exchange) markDLP(detector, where string) {
	ex.markRefused(ReasonDLPMatch, dlpWhy(detector, where), detector+"@"+where)
}

func (ex *exchange) markRefused(reason, why, rule string) {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused == "" {
		f.refused, f.refusedWhy, f.refusedRule = reason, why, rule
	}
}

// refusal returns the refusal marked, if any.
func (ex *exchange) refusal() (reason, why, rule string) {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused, f.refusedWhy, f.refusedRule
}

// applyFindings puts the findings into the event: a refusal makes it
// denied, a DLP match names its rule. It returns whether the event may
// hold a real value (redactEvent takes it out).
func (ex *exchange) applyFindings() (mayHoldReal bool) {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dlpRule != "" && ex.ev.Decision == store.Allowed {
		ex.ev.Reason, ex.ev.MatchedRule = ReasonDLPMatch, f.dlpRule
	}
	for _, r := range f.dlpMore {
		ex.note("dlp: " + r)
	}
	if f.refused != "" && ex.ev.Reason != f.refused {
		ex.ev.Decision, ex.ev.Reason, ex.ev.MatchedRule = store.Denied, f.refused, f.refusedRule
		ex.note(f.refusedWhy)
	}
	return f.mayHoldReal || f.refused == ReasonSecretRealValue
}

func dlpWhy(detector, where string) string {
	return fmt.Sprintf("the request carries what looks like a credential (detector %s, in %s), and this sandbox's [dlp] action is \"block\"", detector, where)
}

// refuseLeak answers a leak found before anything was forwarded.
func (ex *exchange) refuseLeak(w http.ResponseWriter, l *leak) {
	ex.markLeak(l)
	ex.answerRefusal(w)
}

// refuseDLP answers a blocking DLP match found in the head.
func (ex *exchange) refuseDLP(w http.ResponseWriter, detector, where string) {
	ex.markDLP(detector, where)
	ex.answerRefusal(w)
}

// answerRefusal writes the 403 of the refusal marked on the exchange.
func (ex *exchange) answerRefusal(w http.ResponseWriter) {
	reason, why, rule := ex.refusal()
	advice := "Send this request without the secret: capsem puts a secret's real value in only for the hosts it belongs to, and never lets the real value itself out of the sandbox."
	if reason == ReasonDLPMatch {
		advice = "Remove the credential from the request. If the task needs to send it, ask the user to list the host under [dlp] allow_hosts, or to declare the credential as a [[secret]] bound to this host."
	}
	ex.refuse(w, http.StatusForbidden, reason, why, advice)
	ex.ev.MatchedRule = rule
}

// scanner returns the DLP scanner for d, built once per set of detectors.
func (p *Proxy) scanner(d policy.DLP) *dlp.Scanner {
	key := strings.Join(d.Detectors, ",")
	if s, ok := p.scanners.Load(key); ok {
		return s.(*dlp.Scanner)
	}
	s, err := dlp.NewScanner(d.Detectors)
	if err != nil {
		// The policy checked the names against dlp.Detectors: this is a
		// bug, and scanning nothing would fail open.
		panic(err)
	}
	p.scanners.Store(key, s)
	return s
}

// withCancel gives the exchange a context its guard can cancel.
func (ex *exchange) withCancel(ctx context.Context) context.Context {
	ctx, ex.cancel = context.WithCancel(ctx)
	return ctx
}
