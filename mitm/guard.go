package mitm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/mitm/internal/contentcoding"
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
func (ex *exchange) guard(w http.ResponseWriter, r *http.Request) bool {
	sc := ex.fs.scanFor(ex.p, ex.pol)
	ex.view, ex.scanner, ex.dlpBlock = sc.view, sc.scanner, sc.dlpBlock
	if ex.view == nil && ex.scanner == nil {
		return true
	}
	if ex.checkFields(r, "", sc) {
		ex.answerRefusal(w)
		return false
	}
	var sub [][2][]byte
	if ex.view != nil && len(ex.view.bound) > 0 {
		if n := ex.view.substituteHead(r); n > 0 {
			ex.note(fmt.Sprintf("placeholders replaced in the header or URL: %d", n))
		}
		if ae := r.Header.Get("Accept-Encoding"); ae != "" && ae != "identity" {
			r.Header.Set("Accept-Encoding", "identity")
			ex.note("asked for an uncoded response (Accept-Encoding: identity), so that a reflected secret can be scrubbed from it")
		}
		if len(ex.view.bodySub) > 0 {
			sub = ex.view.bodySub
		}
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true // nothing to scan (an HTTP/2 request without DATA has a Body that is empty)
	}
	g := &bodyGuard{src: r.Body, view: ex.view, exempt: ex.view.exempt(), dlpBlock: ex.dlpBlock, bufSize: bufFor(r.ContentLength)}
	if ex.view != nil {
		g.leaks = ex.view.leaks.Stream()
	}
	if ex.scanner != nil {
		g.dlp = ex.scanner.Stream()
	}
	if sub != nil {
		g.reps = chainReplacers(guardSink{g}, sub)
	}
	g.onLeak = func(l *leak) {
		ex.markLeak(l)
		ex.cancel()
	}
	// A trailer arrives with the end of the body: it is checked like the
	// header before the body's end is passed on, so that a refused
	// trailer never reaches the upstream.
	g.atEOF = func() bool {
		if len(r.Trailer) == 0 || !ex.checkFields(&http.Request{Header: r.Trailer, URL: &url.URL{}}, "trailer ", sc) {
			return false
		}
		ex.cancel()
		return true
	}
	g.onDLP = func(m dlp.Match) bool {
		where := "body@" + strconv.FormatInt(m.Offset, 10)
		ex.dlpMatch(m.Detector, where)
		if !g.dlpBlock {
			return false
		}
		ex.markDLP(m.Detector, where)
		ex.cancel()
		return true
	}
	var body io.ReadCloser = g
	if ce := contentcoding.Of(r.Header); contentcoding.IsCoded(ce) {
		cg, err := newCodedGuard(r.Body, ce, g)
		if err != nil {
			ex.note("the request body has Content-Encoding " + ce + ", which capsem cannot decode: it was neither scanned for secrets and credentials nor rewritten")
			ex.unscanned()
			return true
		}
		ex.note("the request body has Content-Encoding " + ce + ": it was scanned decoded, and not rewritten")
		body, sub = cg, nil
	}
	if r.ContentLength >= 0 && r.ContentLength <= MaxBufferedBody {
		held, ok := ex.holdBody(w, r, body, MaxBufferedBody)
		if !ok {
			return false
		}
		r.Body = held
		r.ContentLength = int64(len(held.Bytes()))
		r.Header.Del("Content-Length")
		return true
	}
	r.Body = body
	if sub != nil {
		r.ContentLength = -1
		r.Header.Del("Content-Length")
	}
	return true
}

// headField is a part of a request head DLP scans: where it is (a
// header's name, or "url"), its text, and whether it is where a client
// sends its credential — a header value, the query — rather than data (the
// path, which a host may keep: a file's name on api.github.com).
type headField struct {
	where, text string
	credential  bool
}

// headScanFields are the parts of a request head DLP scans.
func headScanFields(r *http.Request) []headField {
	var out []headField
	for name, vals := range r.Header {
		for _, v := range vals {
			out = append(out, headField{name, v, true})
		}
	}
	out = append(out, headField{"url", r.URL.EscapedPath(), false})
	if r.URL.RawQuery != "" {
		out = append(out, headField{"url", "?" + r.URL.RawQuery, true})
	}
	return out
}

// checkFields checks a request head (or trailer, where is then
// "trailer "): a leaked secret in a header, the URL or the host, and, with
// DLP on, a credential in a header or the URL, which is noted — where a
// client sends its credential (header values, the query) with the flow's
// head scanner, which leaves out the detectors expected at its host, and
// the path with them all. It marks a refusal and returns true for a leak,
// or a credential under "block".
func (ex *exchange) checkFields(r *http.Request, where string, sc *flowScan) bool {
	if ex.view != nil {
		if l := ex.view.checkHead(r); l != nil {
			l.where = where + l.where
			ex.markLeak(l)
			return true
		}
	}
	if sc.scanner == nil {
		return false
	}
	exempt := ex.view.exempt()
	for _, f := range headScanFields(r) {
		s := sc.scanner
		if f.credential {
			s = sc.head
		}
		if s == nil {
			continue
		}
		for _, m := range s.ScanString(f.text) {
			if exemptValue(exempt, m.Value) {
				continue
			}
			ex.dlpMatch(m.Detector, where+f.where)
			if ex.dlpBlock {
				ex.markDLP(m.Detector, where+f.where)
				return true
			}
		}
	}
	return false
}

// exempt are the real values DLP lets through: those of the secrets bound
// to this host (where they belong); nil for a nil view.
func (v *secretView) exempt() [][]byte {
	if v == nil {
		return nil
	}
	return v.boundReals
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
	refusedAdv  string   // what the guest is told to do instead; "": the guard's advice
	dlpRule     string   // the first DLP match, detector@where
	dlpMore     []string // the others
	// mayHoldReal: a body went unscanned (a content coding capsem cannot
	// decode), or a response carried a real value back, so the event's
	// previews or headers may hold one.
	mayHoldReal bool
	// A response from a bound host carried a real value back (reflect.go):
	// the first as NAME@where, and what each was; or it was cut.
	reflectRule  string
	reflectNotes []string
	cutReason    string
	cutWhy       string
}

// unscanned notes that a body was not scanned or scrubbed: the event is
// redacted before it is stored.
func (ex *exchange) unscanned() {
	ex.found.mu.Lock()
	ex.found.mayHoldReal = true
	ex.found.mu.Unlock()
}

// dlpMatch notes a DLP match.
func (ex *exchange) dlpMatch(detector, where string) {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	rule := detector + "@" + where
	if f.dlpRule == "" {
		f.dlpRule = rule
	} else if len(f.dlpMore) < 16 {
		f.dlpMore = append(f.dlpMore, rule)
	}
}

// markLeak records a leak as the exchange's refusal (the first one wins).
func (ex *exchange) markLeak(l *leak) {
	ex.markRefused(l.reason(), l.why(ex.fs.sni), l.secret.Name, "")
}

// markDLP records a blocking DLP match as the exchange's refusal.
func (ex *exchange) markDLP(detector, where string) {
	ex.markRefused(ReasonDLPMatch, dlpWhy(detector, where), detector+"@"+where, "")
}

// markRefused records the exchange's refusal; the first one wins.
func (ex *exchange) markRefused(reason, why, rule, advice string) {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused == "" {
		f.refused, f.refusedWhy, f.refusedRule, f.refusedAdv = reason, why, rule, advice
	}
}

// refusal returns the refusal marked, if any.
func (ex *exchange) refusal() (reason, why, rule, advice string) {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused, f.refusedWhy, f.refusedRule, f.refusedAdv
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
	for _, n := range f.reflectNotes {
		ex.note(n)
	}
	switch {
	case f.cutReason != "" && ex.ev.Reason != f.cutReason:
		ex.ev.Decision, ex.ev.Reason, ex.ev.MatchedRule = store.Denied, f.cutReason, f.reflectRule
		ex.note(f.cutWhy)
	case f.reflectRule != "" && ex.ev.Decision == store.Allowed:
		if ex.ev.Reason == ReasonDLPMatch {
			ex.note("dlp: " + ex.ev.MatchedRule)
		}
		ex.ev.Reason, ex.ev.MatchedRule = ReasonSecretReflected, f.reflectRule
	}
	return f.mayHoldReal || f.refused == ReasonSecretRealValue
}

// answerUnscanned answers the guest 502 for a response refused because it
// could not be scanned (reflect.go); false for another error.
func (ex *exchange) answerUnscanned(w http.ResponseWriter, err error) bool {
	var un *errUnscannable
	reason, why := "", ""
	if errors.As(err, &un) {
		reason, why = ReasonSecretUnscannable, un.Error()
	} else {
		ex.found.mu.Lock()
		reason, why = ex.found.cutReason, ex.found.cutWhy
		ex.found.mu.Unlock()
	}
	if reason == "" {
		return false
	}
	ex.markReflectCut(reason, why)
	ex.ev.StatusCode = http.StatusBadGateway
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Capsem-Blocked", reason)
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "capsem: the request was allowed, but its response is refused: %s.\n"+
		"This host holds a secret's real value, and capsem passes on only what it could scan for it. "+
		"Ask for the response uncoded (Accept-Encoding: identity), or tell the user.\n", why)
	return true
}

func dlpWhy(detector, where string) string {
	return fmt.Sprintf("the request carries what looks like a credential (detector %s, in %s), and this sandbox's [dlp] action is \"block\"", detector, where)
}

// answerRefusal writes the 403 of the refusal marked on the exchange.
func (ex *exchange) answerRefusal(w http.ResponseWriter) {
	reason, why, rule, advice := ex.refusal()
	switch {
	case advice != "":
	case reason != ReasonDLPMatch:
		advice = "Send this request without the secret: capsem puts a secret's real value in only for the hosts it belongs to, and never lets the real value itself out of the sandbox."
	default:
		advice = "Remove the credential from the request. If the task needs to send it, ask the user to declare the credential as a [[secret]] bound to this host, to list the host under [dlp] expected_hosts for the detector if this is the host's own credential, or under [dlp] allow_hosts."
	}
	ex.refuse(w, http.StatusForbidden, reason, why, advice)
	ex.ev.MatchedRule = rule
}

// scanner returns the DLP scanner of the detectors named (nil: all of
// them), built once per set of detectors.
func (p *Proxy) scanner(detectors []string) *dlp.Scanner {
	key := strings.Join(detectors, ",")
	if s, ok := p.scanners.Load(key); ok {
		return s.(*dlp.Scanner)
	}
	s, err := dlp.NewScanner(detectors)
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
