package mitm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/capsem/capsem/mitm/internal/contentcoding"
	"github.com/capsem/capsem/secret"
)

// A secret's own host is given its real value, and may say it back: an API
// that echoes a request, a model asked to repeat what it was sent, a host
// that stores data and returns it re-encoded. Every HTTP response of such
// a host is scanned before the guest sees it — the response header (names
// and values), 1xx headers, trailers, and the body decoded from any content
// coding — for the real value in every form the leak matcher knows, as the
// bytes run and folded (secret.Scrubber: any case, whitespace out, JSON
// strings of a key path read as one text across events). A WebSocket's
// upstream frames are not (wsguard.go). A match reaches the guest as the
// placeholder and is recorded as secret-reflected. What cannot be scanned
// is not passed: a content coding capsem cannot undo gets a 502, a stream
// that breaks mid-way is cut there.
//
// The scan is defence in depth: by default the real value goes only into
// a request's header and query (policy.DefaultSecretIn), which hosts do
// not repeat; a body is substituted only where the secret says so.

// smallResponse is the largest response body (by Content-Length) that is
// scanned whole before its header goes on, so that it keeps an exact
// Content-Length: most API answers. A larger or unsized body streams,
// without one (its length changes where a value is replaced).
const smallResponse = 64 << 10

// errUnscannable refuses a response from a secret's host whose content
// coding capsem cannot undo.
type errUnscannable struct{ coding string }

func (e *errUnscannable) Error() string {
	return fmt.Sprintf("the response from a secret's host has Content-Encoding %q, which capsem cannot decode to scan for the secret's real value", e.coding)
}

// scrubResponse scans the body of a response from a bound host (see
// above), decoding it first when the upstream coded it though capsem asked
// for none; it returns an error (the response is refused) when the coding
// cannot be undone.
func (ex *exchange) scrubResponse(resp *http.Response) error {
	v := ex.view
	if v == nil || v.reflect == nil || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	body := resp.Body
	decoded := false
	if ce := contentcoding.Of(resp.Header); contentcoding.IsCoded(ce) {
		r, err := contentcoding.NewReader(ce, body)
		if err != nil {
			return &errUnscannable{coding: ce}
		}
		body = struct {
			io.Reader
			io.Closer
		}{r, closeBoth{r, resp.Body}}
		resp.Header.Del("Content-Encoding")
		resp.ContentLength = -1
		decoded = true
		ex.note("the response had Content-Encoding " + ce + " though capsem asked for none: it was decoded to be scanned for the secret's real value, and the guest gets it uncoded")
	}
	if !decoded && resp.ContentLength >= 0 && resp.ContentLength < int64(v.reflect.MinLen()) {
		return nil // too short to hold a real value in any form (an API's small answers)
	}
	g := &reflectGuard{src: body, ex: ex}
	g.sc = v.reflect.Stream(&g.out, g.hit)
	resp.Header.Del("Content-Length")
	if !decoded && resp.ContentLength >= 0 && resp.ContentLength <= smallResponse {
		b, err := io.ReadAll(g)
		body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", fmt.Sprint(len(b)))
		return nil
	}
	// resp.ContentLength stays when the upstream sent one: ReverseProxy
	// takes -1 for a stream and flushes every write, which cost a quarter
	// of the requests/s of a bound host (bench:mitm, 16 µs of 190 per
	// request); the guest's header has none, as the length may change.
	resp.Body = g
	return nil
}

// closeBoth closes a decoder and the body under it.
type closeBoth struct{ a, b io.Closer }

func (c closeBoth) Close() error { c.a.Close(); return c.b.Close() }

// reflectGuard is a response body from a bound host on its way to the
// guest, through the secrets' scrubber.
type reflectGuard struct {
	src io.ReadCloser
	sc  *secret.ScrubStream
	ex  *exchange
	out bytes.Buffer // scrubbed, not read yet
	buf []byte
	err error
}

func (g *reflectGuard) Read(p []byte) (int, error) {
	for g.out.Len() == 0 {
		if g.err != nil {
			return 0, g.err
		}
		if g.buf == nil {
			g.buf = make([]byte, 32<<10)
		}
		n, err := g.src.Read(g.buf)
		if n > 0 {
			if _, werr := g.sc.Write(g.buf[:n]); werr != nil {
				g.cut(werr)
				return 0, g.err
			}
		}
		switch {
		case err == io.EOF:
			g.sc.Close()
			g.err = io.EOF
		case err != nil:
			g.cut(err)
		}
	}
	return g.out.Read(p)
}

// cut ends the body with err: what is held back never reaches the guest.
func (g *reflectGuard) cut(err error) {
	g.err = err
	if errors.Is(err, secret.ErrHeldTooLong) {
		g.ex.markReflectCut(ReasonSecretReflected, "the response was cut: "+err.Error())
		return
	}
	if errors.Is(err, contentcoding.ErrCorrupt) {
		g.ex.markReflectCut(ReasonSecretUnscannable, "the response was cut where its content coding broke ("+err.Error()+"): what follows could not be scanned for the secret's real value")
	}
}

func (g *reflectGuard) Close() error { return g.src.Close() }

func (g *reflectGuard) hit(h secret.ScrubHit) { g.ex.reflected(h, "body") }

// scrubFields turns the real values of the bound secrets in a response's
// header (or 1xx header, or trailer: where says which) back into their
// placeholders, in every form and fold: in the values, and in the names —
// a host that echoes a query key as a header name says the value there.
func (ex *exchange) scrubFields(h http.Header, where string) {
	v := ex.view
	if v == nil || v.reflect == nil {
		return
	}
	for name, vals := range h {
		for i, val := range vals {
			if out, hits := v.reflect.ScrubString(val); len(hits) > 0 {
				vals[i] = out
				for _, hit := range hits {
					ex.reflected(hit, where+" "+name)
				}
			}
		}
		if out, hits := v.reflect.ScrubString(name); len(hits) > 0 {
			delete(h, name)
			h[out] = append(h[out], vals...)
			for _, hit := range hits {
				ex.reflected(hit, where+" name")
			}
		}
	}
}

// reflected records a value found in a response.
func (ex *exchange) reflected(h secret.ScrubHit, where string) {
	name := ex.view.secrets[h.ID].Name
	how := string(h.Form)
	if h.Folded {
		how += ", split by whitespace, escapes or events"
	}
	detail := fmt.Sprintf("the response carried the real value of secret %s back (%s, in %s); the guest got the placeholder in its place", name, how, where)
	if h.Passed > 0 {
		detail += fmt.Sprintf(" after the first %d characters of that form, which went before the rest arrived", h.Passed)
	}
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mayHoldReal = true // the event's record of the response may hold it: redactEvent
	if f.reflectRule == "" {
		f.reflectRule = name + "@" + where
	}
	if len(f.reflectNotes) < 8 {
		f.reflectNotes = append(f.reflectNotes, detail)
	}
}

// markReflectCut records that the response was cut rather than passed on.
func (ex *exchange) markReflectCut(reason, why string) {
	f := &ex.found
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cutReason == "" {
		f.cutReason, f.cutWhy = reason, why
	}
}

// scrubWriter scrubs what the reverse proxy writes into the guest's
// response header outside ModifyResponse: 1xx headers (written straight
// from the transport's trace), the Trailer field it announces the
// upstream's trailers with (added after ModifyResponse), and, when the
// handler is done, the trailers.
type scrubWriter struct {
	http.ResponseWriter
	ex *exchange
}

func (w *scrubWriter) WriteHeader(code int) {
	where := "header"
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		where = "1xx header"
	}
	w.ex.scrubFields(w.Header(), where)
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer's Flush and
// Hijack.
func (w *scrubWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish scrubs the trailers the reverse proxy put in the header map once
// the body was copied; the server sends them when the handler returns.
func (w *scrubWriter) finish() { w.ex.scrubFields(w.Header(), "trailer") }
