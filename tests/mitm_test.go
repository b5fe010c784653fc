package tests

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// mitmEnv is a guest whose HTTPS goes through capsem's MITM to upstreams
// on host loopback that present certificates of the tests' own CA.
type mitmEnv struct {
	*env
	upstreamCA *testCA
	port       int // the main upstream (api.test, front.test, pinned.test)
	rogue      int // an upstream whose certificate capsem must not trust
}

func mitmPolicy(m *mitmEnv, extra string) string {
	return fmt.Sprintf(`
[network]
default = "deny"
allow = ["api.test:443", "front.test:443", "pinned.test:443", "rogue.test:443"]

[upstream]
resolve = { "api.test" = "127.0.0.1:%[1]d", "front.test" = "127.0.0.1:%[1]d", "pinned.test" = "127.0.0.1:%[1]d", "rogue.test" = "127.0.0.1:%[2]d" }
ca_files = [%[3]q]

[[http]]
host = "api.test"
paths = ["/admin/*"]
action = "deny"

[tls]
passthrough = ["pinned.test"]
%[4]s
`, m.port, m.rogue, m.upstreamCA.pemPath, extra)
}

func startMITM(t *testing.T, extra string) *mitmEnv {
	needHarness(t)
	m := &mitmEnv{upstreamCA: newTestCA(t, "tests upstream CA")}
	m.port = startHTTPS(t, m.upstreamCA, upstreamHandler(), "api.test", "front.test", "pinned.test")
	rogueCA := newTestCA(t, "a CA nobody trusts")
	m.rogue = startHTTPS(t, rogueCA, upstreamHandler(), "rogue.test")
	m.env = startEnv(t, mitmPolicy(m, extra), envOptions{})
	return m
}

// curl runs curl in the guest trusting the capsem CA the ordinary way.
func (m *mitmEnv) curl(args ...string) (string, error) {
	return m.runEnv(150*time.Second, m.trustEnv(), "curl", append([]string{"-sS", "--max-time", "20"}, args...)...)
}

func (m *mitmEnv) mustCurl(args ...string) string {
	m.t.Helper()
	out, err := m.curl(args...)
	if err != nil {
		m.t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// httpEvent finds the event of a request the MITM saw.
func httpEvent(evs []store.Event, method, path string) *store.Net {
	return netEvent(evs, func(n *store.Net) bool { return n.Method == method && n.Path == path })
}

func TestMITMCurlHTTP1AndHTTP2(t *testing.T) {
	m := startMITM(t, "")
	for _, c := range []struct{ flag, version string }{{"--http1.1", "1.1"}, {"--http2", "2"}} {
		out := m.mustCurl(c.flag, "-w", "\nversion=%{http_version} status=%{http_code}", "https://api.test/hello")
		if !strings.Contains(out, "hello from api.test") || !strings.Contains(out, "version="+c.version+" status=200") {
			t.Errorf("curl %s: %q", c.flag, out)
		}
	}
	// The guest sees a leaf of the capsem CA, not the upstream's.
	out := m.mustCurl("-v", "-o", "/dev/null", "https://api.test/hello")
	if !regexp.MustCompile(`issuer: O=capsem; CN=capsem CA`).MatchString(out) {
		t.Errorf("the guest did not see a capsem leaf:\n%s", out)
	}
	evs := m.stop()
	n := httpEvent(evs, "GET", "/hello")
	if n == nil || n.StatusCode != 200 || n.ConnType != store.ConnHTTPS || n.Domain != "api.test" || n.Decision != store.Allowed {
		t.Fatalf("no allowed https event for GET /hello:\n%s", dumpEvents(evs))
	}
	if n.BytesReceived == 0 || n.Duration <= 0 || !strings.Contains(n.ResponseBodyPreview, "hello from api.test") {
		t.Errorf("event lacks bytes/duration/preview: %+v", n)
	}
	var ua bool
	for _, h := range n.RequestHeaders {
		ua = ua || (strings.EqualFold(h.Name, "User-Agent") && strings.HasPrefix(h.Value, "curl/"))
	}
	if !ua {
		t.Errorf("request headers not recorded: %v", n.RequestHeaders)
	}
}

func TestMITMPythonNodeAndOpenSSL(t *testing.T) {
	m := startMITM(t, "")
	out, err := m.runEnv(30*time.Second, m.trustEnv(), "python3", "-c",
		`import urllib.request; print(urllib.request.urlopen("https://api.test/hello?from=python", timeout=20).read().decode())`)
	if err != nil || !strings.Contains(out, "hello from api.test") {
		t.Errorf("python urllib: %v\n%s", err, out)
	}
	out, err = m.runEnv(30*time.Second, m.trustEnv(), "node", "-e",
		`fetch("https://api.test/hello?from=node").then(r => r.text()).then(t => console.log(t)).catch(e => { console.error(e); process.exit(1) })`)
	if err != nil || !strings.Contains(out, "hello from api.test") {
		t.Errorf("node fetch: %v\n%s", err, out)
	}
	out, err = m.runEnv(30*time.Second, nil, "sh", "-c",
		`printf 'GET /hello?from=openssl HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n' | openssl s_client -quiet -verify_return_error -CAfile "$1" -connect api.test:443 -servername api.test 2>&1`,
		"sh", m.caCert)
	if err != nil || !strings.Contains(out, "hello from api.test") {
		t.Errorf("openssl s_client: %v\n%s", err, out)
	}
	evs := m.stop()
	for _, from := range []string{"python", "node", "openssl"} {
		if netEvent(evs, func(n *store.Net) bool { return n.Path == "/hello" && n.Query == "from="+from && n.StatusCode == 200 }) == nil {
			t.Errorf("no event for the %s request:\n%s", from, dumpEvents(evs))
		}
	}
}

func TestMITMRefusesWrongOrMissingSNI(t *testing.T) {
	m := startMITM(t, "")
	ip := m.digA("api.test")
	for _, c := range []struct{ name, args string }{
		{"mismatch", "-servername front.test"},
		{"none", "-noservername"},
	} {
		out, err := m.runEnv(20*time.Second, nil, "sh", "-c",
			fmt.Sprintf(`printf 'GET /hello HTTP/1.1\r\nHost: api.test\r\n\r\n' | openssl s_client -quiet -CAfile %s -connect %s:443 %s 2>&1`, m.caCert, ip, c.args))
		if strings.Contains(out, "hello from") {
			t.Errorf("%s SNI: got through: %v\n%s", c.name, err, out)
		}
	}
	evs := m.stop()
	for _, reason := range []string{"tls-sni-mismatch", "tls-no-sni"} {
		if netEvent(evs, func(n *store.Net) bool { return n.Reason == reason && n.Decision == store.Denied && n.Port == 443 }) == nil {
			t.Errorf("no denied event with reason %s:\n%s", reason, dumpEvents(evs))
		}
	}
}

func TestMITMDomainFrontingGets421(t *testing.T) {
	m := startMITM(t, "")
	out := m.mustCurl("-H", "Host: front.test", "-w", "\nstatus=%{http_code}", "https://api.test/hello")
	if !strings.Contains(out, "status=421") || strings.Contains(out, "hello from") {
		t.Errorf("fronted request: %q", out)
	}
	evs := m.stop()
	if n := httpEvent(evs, "GET", "/hello"); n == nil || n.Reason != "http-host-not-sni" || n.Decision != store.Denied || n.StatusCode != 421 {
		t.Errorf("no denied fronting event:\n%s", dumpEvents(evs))
	}
}

func TestMITMHTTPRuleDeniesWith403(t *testing.T) {
	m := startMITM(t, "")
	out := m.mustCurl("-w", "\nstatus=%{http_code}", "https://api.test/admin/users")
	if !strings.Contains(out, "status=403") || !strings.Contains(out, "capsem blocked this request") ||
		!strings.Contains(out, "GET https://api.test/admin/users") || strings.Contains(out, "admin page") {
		t.Errorf("denied request: %q", out)
	}
	// A path that tries to climb out of an allowed prefix is decided on
	// the cleaned path.
	out = m.mustCurl("--path-as-is", "-w", "\nstatus=%{http_code}", "https://api.test/hello/../admin/x")
	if strings.Contains(out, "admin page") {
		t.Errorf("traversal reached the admin page: %q", out)
	}
	out = m.mustCurl("https://api.test/hello")
	if !strings.Contains(out, "hello from") {
		t.Errorf("allowed request after a denied one: %q", out)
	}
	evs := m.stop()
	n := httpEvent(evs, "GET", "/admin/users")
	if n == nil || n.Decision != store.Denied || n.StatusCode != 403 || n.MatchedRule == "" || n.Reason != "http-denied" {
		t.Errorf("no denied event naming the rule:\n%s", dumpEvents(evs))
	}
}

func TestMITMPassthroughIsNotIntercepted(t *testing.T) {
	m := startMITM(t, "")
	// Spliced: the guest sees the upstream's own certificate, so it must
	// trust the upstream CA, and the capsem CA is not enough.
	out, err := m.runEnv(30*time.Second, nil, "curl", "-sS", "--cacert", m.upstreamCA.pemPath, "https://pinned.test/hello")
	if err != nil || !strings.Contains(out, "hello from pinned.test") {
		t.Errorf("passthrough with the upstream CA: %v %q", err, out)
	}
	if out, err := m.curl("https://pinned.test/hello"); err == nil {
		t.Errorf("passthrough was intercepted: the capsem CA verified it: %q", out)
	}
	evs := m.stop()
	if netEvent(evs, func(n *store.Net) bool {
		return n.Domain == "pinned.test" && n.ConnType == store.ConnTLS && n.Decision == store.Allowed && n.BytesReceived > 0
	}) == nil {
		t.Errorf("no allowed tls passthrough flow event:\n%s", dumpEvents(evs))
	}
	if httpEvent(evs, "GET", "/hello") != nil {
		t.Errorf("a passthrough request was seen as HTTP:\n%s", dumpEvents(evs))
	}
}

func TestMITMUntrustedUpstreamIs502(t *testing.T) {
	m := startMITM(t, "")
	out := m.mustCurl("-w", "\nstatus=%{http_code}", "https://rogue.test/hello")
	if !strings.Contains(out, "status=502") || strings.Contains(out, "hello from") {
		t.Errorf("untrusted upstream: %q", out)
	}
	evs := m.stop()
	if n := httpEvent(evs, "GET", "/hello"); n == nil || n.StatusCode != 502 || !strings.Contains(n.Detail, "certificate") {
		t.Errorf("no 502 event naming the certificate problem:\n%s", dumpEvents(evs))
	}
}

func TestMITMStreamsServerSentEvents(t *testing.T) {
	m := startMITM(t, "")
	// Each event must reach the guest when the upstream sends it (700 ms
	// apart), not when the response ends.
	prog := `
import os, ssl, time, urllib.request
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
r = urllib.request.urlopen("https://api.test/sse", context=ctx, timeout=20)
start = time.monotonic()
for line in r:
    if line.startswith(b"data:"):
        print("%.3f %s" % (time.monotonic() - start, line.decode().strip()))
`
	out, err := m.runEnv(30*time.Second, m.trustEnv(), "python3", "-c", prog)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 events, got %q", out)
	}
	var at []float64
	for _, l := range lines {
		f, _ := strconv.ParseFloat(strings.Fields(l)[0], 64)
		at = append(at, f)
	}
	if at[1]-at[0] < 0.5 || at[2]-at[1] < 0.5 {
		t.Errorf("events arrived together (buffered): %q", out)
	}
	evs := m.stop()
	if n := httpEvent(evs, "GET", "/sse"); n == nil || !strings.Contains(n.ResponseBodyPreview, `data: {"n":2}`) {
		t.Errorf("SSE event preview incomplete:\n%s", dumpEvents(evs))
	}
}

func TestMITMCompressedBodyPassesUnchanged(t *testing.T) {
	m := startMITM(t, "")
	// Without --compressed curl writes the body as received: gzip bytes.
	out := m.mustCurl("-H", "Accept-Encoding: gzip", "-o", "/dev/stdout", "https://api.test/gzip")
	if !strings.HasPrefix(out, "\x1f\x8b") {
		t.Fatalf("the guest did not get the gzip stream unchanged: %q", out[:min(len(out), 40)])
	}
	out = m.mustCurl("--compressed", "https://api.test/gzip")
	if strings.Count(out, "compressed hello") != 100 {
		t.Errorf("decoded body: %d lines", strings.Count(out, "compressed hello"))
	}
	evs := m.stop()
	if n := httpEvent(evs, "GET", "/gzip"); n == nil || !strings.Contains(n.ResponseBodyPreview, "compressed hello, decoded on the side") {
		t.Errorf("the preview is not the decoded body:\n%s", dumpEvents(evs))
	}
}

func TestMITMWebSocketUpgrade(t *testing.T) {
	m := startMITM(t, "")
	prog := `
import os, socket, ssl, base64
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection(("api.test", 443), timeout=20), server_hostname="api.test")
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /ws HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
resp = b""
while b"\r\n\r\n" not in resp:
    resp += s.recv(4096)
head, rest = resp.split(b"\r\n\r\n", 1)
print(head.split(b"\r\n")[0].decode())
payload = b"websocket bytes both ways"
s.sendall(payload)
got = rest
while len(got) < len(payload):
    got += s.recv(4096)
print("echo:", got.decode())
`
	out, err := m.runEnv(30*time.Second, m.trustEnv(), "python3", "-c", prog)
	if err != nil || !strings.Contains(out, "101 Switching Protocols") || !strings.Contains(out, "echo: websocket bytes both ways") {
		t.Fatalf("websocket: %v\n%s", err, out)
	}
	evs := m.stop()
	if n := httpEvent(evs, "GET", "/ws"); n == nil || n.StatusCode != 101 || !strings.Contains(n.Detail, "websocket") {
		t.Errorf("no upgrade event:\n%s", dumpEvents(evs))
	}
}

// TestMITMPoolsUpstreamConnections: curl run once per request, a new
// guest connection and TLS handshake each time, is forwarded over one
// upstream connection kept alive across the guest's connections, and from
// the second on the stack dials nothing for the guest's connection.
func TestMITMPoolsUpstreamConnections(t *testing.T) {
	m := startMITM(t, "")
	remotes := map[string]int{}
	const n = 4
	for i := range n {
		out := m.mustCurl("--http1.1", "https://api.test/remote")
		r, ok := strings.CutPrefix(out, "remote=")
		if !ok {
			t.Fatalf("curl %d: %q", i, out)
		}
		remotes[r]++
	}
	if len(remotes) != 1 {
		t.Errorf("%d curl runs reached the upstream over %d connections, want 1 (pooled): %v", n, len(remotes), remotes)
	}
	evs := m.stop()
	var dialled, pooled int
	for _, ev := range evs {
		if ev.Net == nil || ev.Net.Domain != "api.test" || ev.Net.ConnType != store.ConnHTTPS || ev.Net.Method != "" {
			continue
		}
		switch {
		case strings.HasPrefix(ev.Net.Detail, "upstream 127.0.0.1:"):
			dialled++
		case strings.HasPrefix(ev.Net.Detail, "upstream connections kept alive"):
			pooled++
		default:
			t.Errorf("flow event detail %q", ev.Net.Detail)
		}
	}
	if dialled != 1 || pooled != n-1 {
		t.Errorf("flow events: %d dialled an upstream, %d took the pool's; want 1 and %d\n%s", dialled, pooled, n-1, dumpEvents(evs))
	}
}

func TestMITMPolicyReloadAppliesToNextRequestOnKeepAlive(t *testing.T) {
	m := startMITM(t, "")
	// One connection: a request, a pause in which the policy changes, a
	// second request on the same connection.
	prog := `
import http.client, os, ssl, sys, time
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
c = http.client.HTTPSConnection("api.test", 443, context=ctx, timeout=20)
c.request("GET", "/hello"); r = c.getresponse(); print("first", r.status, r.read()[:20])
sock = c.sock
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
same = c.sock is sock
c.request("GET", "/hello"); r = c.getresponse(); body = r.read()
print("second", r.status, "same-conn" if same and c.sock is sock else "new-conn")
`
	dir := t.TempDir()
	reloaded, first := dir+"/reloaded", dir+"/first"
	done := make(chan struct{})
	var out string
	var err error
	go func() {
		defer close(done)
		out, err = m.runEnv(40*time.Second, m.trustEnv(), "python3", "-c", prog, reloaded, first)
	}()
	waitFor(t, func() bool { _, err := os.Stat(first); return err == nil }, "the first request")
	pol := strings.Replace(mitmPolicy(m, ""), `paths = ["/admin/*"]`, `paths = ["/admin/*", "/hello"]`, 1)
	if err := os.WriteFile(m.policyPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	m.signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(m.out.String(), "policy reloaded") }, "the reload")
	os.WriteFile(reloaded, nil, 0o644)
	<-done
	if err != nil || !strings.Contains(out, "first 200") || !strings.Contains(out, "second 403 same-conn") {
		t.Fatalf("keep-alive across a reload: %v\n%s", err, out)
	}
}

func TestMITMSecretHeadersAreHashed(t *testing.T) {
	m := startMITM(t, "")
	secrets := []string{"sk-ant-api03-SECRETSECRETSECRET", "Bearer ghp_SECRETTOKENSECRETTOKEN", "session=SECRETCOOKIE"}
	m.mustCurl("-H", "x-api-key: "+secrets[0], "-H", "Authorization: "+secrets[1], "-H", "Cookie: "+secrets[2], "https://api.test/echo-headers")
	evs := m.stop()
	n := httpEvent(evs, "GET", "/echo-headers")
	if n == nil {
		t.Fatalf("no event:\n%s", dumpEvents(evs))
	}
	hashed := 0
	for _, h := range n.RequestHeaders {
		for _, s := range secrets {
			if strings.Contains(h.Value, "SECRET") {
				t.Errorf("header %s stored in clear: %q (%s)", h.Name, h.Value, s)
			}
		}
		if strings.HasPrefix(h.Value, "sha256:") {
			hashed++
		}
	}
	if hashed != 3 {
		t.Errorf("want 3 hashed header values, got %d: %v", hashed, n.RequestHeaders)
	}
}

func TestMITMLargeDownloadIsStreamedNotHeld(t *testing.T) {
	m := startMITM(t, "")
	const size = 256 << 20
	out := m.mustCurl("--max-time", "120", "-o", "/dev/null", "-w", "%{size_download}", fmt.Sprintf("https://api.test/bytes?n=%d", size))
	if out != strconv.Itoa(size) {
		t.Fatalf("downloaded %s bytes, want %d", out, size)
	}
	hwm := vmHWM(t, m.cmd.Process.Pid)
	if os.Getenv("CAPSEM_TEST_RACE") != "" {
		t.Logf("peak RSS %d MiB not checked: the race detector's shadow memory inflates it", hwm>>20)
	} else if hwm > 160<<20 {
		t.Errorf("capsem-net peak RSS %d MiB after a %d MiB download: the body was held", hwm>>20, size>>20)
	}
	evs := m.stop()
	if n := httpEvent(evs, "GET", "/bytes"); n == nil || n.BytesReceived != size {
		t.Errorf("event bytes: %+v", n)
	}
}

// vmHWM is a process's peak resident set, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no VmHWM")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}
