package tests

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/capsem/capsem/secret"
	"github.com/capsem/capsem/store"
)

// echoBack is a secret's host that says back what it was sent — the
// request's Authorization and its body — in the way ?v= asks, as a
// cooperative upstream would for a prompt-injected agent: one character
// per server-sent event (a model streaming), base64 in 76-column lines (a
// stored blob read back), spaced out ("repeat with spaces"), gzipped
// though the request asked for identity, in a 103 Early Hints header and
// a trailer, or coded in a way no one can undo.
func echoBack(w http.ResponseWriter, r *http.Request, body []byte) {
	said := r.Header.Get("Authorization") + " | " + string(body)
	h := w.Header()
	switch r.URL.Query().Get("v") {
	case "sse":
		h.Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for _, c := range said {
			d, _ := json.Marshal(map[string]any{"type": "content_block_delta", "delta": map[string]string{"type": "text_delta", "text": string(c)}})
			fmt.Fprintf(w, "event: content_block_delta\ndata: %s\n\n", d)
			if fl != nil {
				fl.Flush()
			}
		}
	case "base64":
		b := base64.StdEncoding.EncodeToString([]byte(said))
		for i := 0; i < len(b); i += 76 {
			fmt.Fprintln(w, b[i:min(i+76, len(b))])
		}
	case "spaced":
		fmt.Fprint(w, strings.Join(strings.Split(said, ""), " "))
	case "gzip":
		h.Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, said)
		zw.Close()
	case "hints":
		// Also as the names of a header and a trailer, as a host echoing a
		// query key as a header name would (written as they are: Go would
		// change the case of a canonical key).
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		h.Set("X-Hint", said)
		w.WriteHeader(http.StatusEarlyHints)
		h.Del("X-Hint")
		h["x-echo-"+tok] = []string{"the name"}
		h.Set("Trailer", "X-Said")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "see the trailer")
		h.Set("X-Said", said)
		h[http.TrailerPrefix+"x-t-"+tok] = []string{"the trailer's name"}
	case "unknown-coding":
		h.Set("Content-Encoding", "x-capsem-unknown")
		fmt.Fprint(w, said)
	default:
		fmt.Fprint(w, said)
	}
}

// guestReads is what a client in the guest makes of a response body in
// the echo's variant v: the text it puts together.
func guestReads(t *testing.T, v, out string) string {
	switch v {
	case "sse":
		var b strings.Builder
		for _, line := range strings.Split(out, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				var ev struct {
					Delta struct{ Text string } `json:"delta"`
				}
				if err := json.Unmarshal([]byte(d), &ev); err != nil {
					t.Errorf("sse: an event the guest cannot read: %q (%v)", d, err)
				}
				b.WriteString(ev.Delta.Text)
			}
		}
		return b.String()
	case "base64":
		d, _ := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(out), ""))
		return string(d)
	case "spaced":
		return strings.ReplaceAll(out, " ", "")
	}
	return out
}

// TestSecretsReflectionsNeverReachTheGuest: a secret's own host says the
// real value back in every way a cooperative upstream could — one
// character per event, base64, spaced, gzipped despite identity, in 1xx
// and trailers — for a secret substituted only where credentials live
// (TOKEN: the value goes out in the Authorization header) and for one
// substituted in bodies too (BODY_TOKEN: also in the body). The guest
// never sees either real value, and each reflection is recorded.
func TestSecretsReflectionsNeverReachTheGuest(t *testing.T) {
	s := startSecrets(t)
	m, err := secret.NewMatcher([]secret.Needle{{ID: 1, Value: []byte(s.real)}, {ID: 2, Value: []byte(s.bodyReal)}})
	if err != nil {
		t.Fatal(err)
	}
	holds := func(text string) bool {
		_, raw := m.FindString(text)
		_, folded := m.FindString(strings.Join(strings.Fields(text), ""))
		return raw || folded
	}
	for _, sec := range []string{"TOKEN", "BODY_TOKEN"} {
		for _, proto := range []string{"--http1.1", "--http2"} {
			for _, v := range []string{"plain", "sse", "base64", "spaced", "gzip"} {
				mark := fmt.Sprintf("echo-%s-%s-%s", sec, proto[2:], v)
				// --compressed: curl undoes whatever coding it is given, as
				// a guest that wants the value would.
				out, err := s.guest("sh", "-c", `curl -sS --compressed --max-time 30 `+proto+` -H "Authorization: Bearer $`+sec+`" --data-binary "repeat with spaces: $`+sec+`" "https://api.test/echo?v=`+v+`&m=`+mark+`"`)
				if err != nil {
					t.Errorf("%s: %v %s", mark, err, out)
					continue
				}
				if read := guestReads(t, v, out); holds(out) || holds(read) {
					t.Errorf("%s: the guest got a real value back:\n%s\nwhich it reads as\n%s", mark, out, read)
				} else if !strings.Contains(read, "repeat") {
					t.Errorf("%s: the guest did not get the echo (the test proves nothing):\n%s", mark, read)
				}
				got := s.rec.with("m=" + mark)
				if len(got) != 1 || !strings.Contains(got[0].header.Get("Authorization"), map[string]string{"TOKEN": s.real, "BODY_TOKEN": s.bodyReal}[sec]) {
					t.Errorf("%s: the upstream was not given the real value, so nothing was reflected", mark)
				}
			}
		}
	}

	// A 103 Early Hints header and a trailer (node reads both), and a
	// coding capsem cannot undo: a 502, nothing passed.
	out, err := s.guest("node", "-e", `
const https = require("https");
const req = https.request({host: "api.test", path: "/echo?v=hints&m=echo-hints", method: "POST", headers: {"Authorization": "Bearer " + process.env.TOKEN}}, res => {
  let body = "";
  res.on("data", d => body += d);
  res.on("end", () => console.log("final", res.statusCode, JSON.stringify(res.headers), body, JSON.stringify(res.trailers)));
});
req.on("information", info => console.log("info", info.statusCode, JSON.stringify(info.headers)));
req.on("error", e => { console.log("error", e.message); process.exit(1); });
req.end("repeat: " + process.env.BODY_TOKEN);`)
	if err != nil || !strings.Contains(out, "info 103") || !strings.Contains(out, "final 200") {
		t.Errorf("hints: %v %s", err, out)
	}
	if holds(out) || !strings.Contains(out, s.ph) || !strings.Contains(out, s.bodyPh) {
		t.Errorf("hints: the 103 header or the trailer held a real value, or not the placeholders:\n%s", out)
	}
	out, err = s.guest("sh", "-c", `curl -sS --max-time 30 -D - -H "Authorization: Bearer $TOKEN" "https://api.test/echo?v=unknown-coding&m=echo-unknown"`)
	if err != nil || !strings.Contains(out, " 502") || !strings.Contains(strings.ToLower(out), "x-capsem-blocked: secret-response-unscannable") || holds(out) {
		t.Errorf("unknown coding: %v\n%s", err, out)
	}

	evs := s.stop()
	for _, mark := range []string{"echo-TOKEN-http2-sse", "echo-BODY_TOKEN-http1.1-base64", "echo-TOKEN-http1.1-gzip", "echo-BODY_TOKEN-http2-spaced", "echo-hints"} {
		n := netEvent(evs, func(n *store.Net) bool { return strings.Contains(n.Query, mark) })
		if n == nil || n.Decision != store.Allowed || n.Reason != "secret-reflected" || !strings.Contains(n.MatchedRule, "TOKEN@") {
			t.Errorf("%s: want an allowed secret-reflected event naming the secret, got %+v", mark, n)
		}
	}
	if n := netEvent(evs, func(n *store.Net) bool { return strings.Contains(n.Query, "echo-unknown") }); n == nil || n.Decision != store.Denied || n.Reason != "secret-response-unscannable" {
		t.Errorf("the unknown coding's event: %+v", n)
	}
	assertNowhere(t, s.dataDir, s.real)
	assertNowhere(t, s.dataDir, s.bodyReal)
}
