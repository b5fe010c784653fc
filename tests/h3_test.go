package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/quic-go/quic-go/http3"

	"github.com/capsem/capsem/guest/h3get"
	"github.com/capsem/capsem/mitm"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/tests/harness"
)

// HTTP/3 through capsem with real clients: quic-go's own http3
// client and headless chromium in the guest namespace, a quic-go http3
// upstream (h3.test, which also serves HTTP/2 over TCP on the same port and
// advertises h3 in Alt-Svc) and an HTTP/2-only upstream (h2.test, the
// fallback path) on the host.

// h3ClientEnv switches the test binary into the guest's quic-go client: the
// tests run their own binary in the namespace with the request, as JSON, in
// this variable, and read an h3get.Result from its last line. Go code run in the
// guest needs no build of its own that way.
const h3ClientEnv = "CAPSEM_TEST_H3_CLIENT"

func init() {
	if v := os.Getenv(h3ClientEnv); v != "" {
		var req h3get.Request
		if err := json.Unmarshal([]byte(v), &req); err != nil {
			fmt.Fprintln(os.Stderr, h3ClientEnv+":", err)
			os.Exit(2)
		}
		b, _ := json.Marshal(h3get.Fetch(req))
		fmt.Printf("\n%s\n", b)
		os.Exit(0)
	}
}

// h3Upstream is an upstream on host loopback that answers every request
// with what it saw: the protocol it was reached over, the path and the
// X-H3-Mark header, in a page chromium can load.
type h3Upstream struct {
	port int
	h3   bool // it also serves HTTP/3 on UDP port port
	mu   sync.Mutex
	seen []string // "PROTO PATH" of every request
}

func (u *h3Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Proto+" "+r.URL.Path)
	u.mu.Unlock()
	if u.h3 && r.ProtoMajor < 3 {
		w.Header().Set("Alt-Svc", `h3=":443"; ma=60`)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><title>h3test</title><p>upstream-saw proto=%s path=%s mark=%s</p>\n",
		r.Proto, r.URL.Path, r.Header.Get("X-H3-Mark"))
}

// saw returns the protocols the upstream was reached over for path.
func (u *h3Upstream) saw(path string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, s := range u.seen {
		if p, ok := strings.CutSuffix(s, " "+path); ok {
			out = append(out, p)
		}
	}
	return out
}

// startH3Upstream serves HTTP/2 and HTTP/1.1 over TLS on a loopback TCP
// port with a leaf of ca for names and, when h3, HTTP/3 on the same UDP
// port: capsem's [upstream] resolve names one port for both.
func startH3Upstream(t *testing.T, ca *testCA, h3 bool, names ...string) *h3Upstream {
	t.Helper()
	u := &h3Upstream{h3: h3}
	leaf := ca.leaf(t, names...)
	var ln net.Listener
	var pc net.PacketConn
	for try := 0; ; try++ {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		u.port = ln.Addr().(*net.TCPAddr).Port
		if !h3 {
			break
		}
		if pc, err = net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", u.port)); err == nil {
			break
		}
		ln.Close()
		if try == 20 {
			t.Fatalf("no loopback port free for both TCP and UDP: %v", err)
		}
	}
	srv := httptest.NewUnstartedServer(u)
	srv.Listener.Close()
	srv.Listener = ln
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if h3 {
		h3srv := &http3.Server{
			Handler:   u,
			TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{leaf}}),
		}
		go h3srv.Serve(pc)
		t.Cleanup(func() {
			h3srv.Close()
			pc.Close()
		})
	}
	return u
}

// h3Env is a guest whose policy allows h3.test (HTTP/3 upstream) and
// h2.test (HTTP/2-only upstream) on 443, and denies h3.test's /admin/*.
type h3Env struct {
	*env
	h3, h2 *h3Upstream
}

func h3Policy(h3Port, h2Port int, caPath, extra string) string {
	return fmt.Sprintf(`
[network]
default = "deny"
allow = ["h3.test:443", "h2.test:443"]

[upstream]
resolve = { "h3.test" = "127.0.0.1:%d", "h2.test" = "127.0.0.1:%d" }
ca_files = [%q]

[[http]]
host = "h3.test"
paths = ["/admin/*"]
action = "deny"
%s`, h3Port, h2Port, caPath, extra)
}

func startH3(t *testing.T, extra string, opt envOptions) *h3Env {
	t.Helper()
	needHarness(t)
	ca := newTestCA(t, "tests upstream CA")
	e := &h3Env{
		h3: startH3Upstream(t, ca, true, "h3.test"),
		h2: startH3Upstream(t, ca, false, "h2.test"),
	}
	e.env = startEnv(t, h3Policy(e.h3.port, e.h2.port, ca.pemPath, extra), opt)
	return e
}

// h3Get runs the quic-go client in the guest, trusting capsem's CA.
func (e *env) h3Get(req h3get.Request) h3get.Result {
	e.t.Helper()
	if req.CA == "" {
		req.CA = e.caCert
	}
	self, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := json.Marshal(req)
	out, err := e.runEnv(req.Timeout+30*time.Second, []string{h3ClientEnv + "=" + string(b)}, self)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res h3get.Result
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &res) != nil {
		e.t.Fatalf("the guest's quic-go client (%s): %v\n%s", req.URL, err, out)
	}
	return res
}

// needChromium skips t without chromium and certutil.
func needChromium(t *testing.T) {
	t.Helper()
	if why := harness.ChromiumRequirements(); why != "" {
		t.Skip("chromium unavailable: " + why)
	}
}

// chromium loads url in headless chromium in the guest, with a fresh
// profile trusting capsem's CA, and returns the page's DOM.
func (e *env) chromium(url string, extra ...string) (string, error) {
	e.t.Helper()
	prof, err := harness.NewChromium(e.t.TempDir(), e.caCert)
	if err != nil {
		e.t.Fatal(err)
	}
	return runChromium(e.ns.Command, prof, url, extra...)
}

// runChromium runs chromium, made by cmd, in its own process group, killed
// whole at the end: its renderer and utility processes outlive a killed
// browser process otherwise. It returns what chromium printed on stdout
// (the DOM), and on failure its stderr too.
func runChromium(cmd func(ctx context.Context, name string, args ...string) *exec.Cmd, prof *harness.Chromium, url string, extra ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := cmd(ctx, "chromium", prof.Args(url, extra...)...)
	c.Env = prof.Env()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	if c.Process != nil {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("chromium %s: %v\nstderr:\n%s", url, err, stderr.String())
	}
	return stdout.String(), nil
}

// TestHTTP3UpstreamsDirect checks the tests' upstreams and clients without
// capsem: quic-go's client and forced chromium reach h3.test over HTTP/3,
// its TCP side advertises h3, unforced chromium loads it over TCP, and the
// HTTP/2-only upstream refuses QUIC at once (nothing listens on its UDP
// port). A failure here is the harness's, not capsem's.
func TestHTTP3UpstreamsDirect(t *testing.T) {
	ca := newTestCA(t, "tests upstream CA")
	h3u := startH3Upstream(t, ca, true, "h3.test")
	h2u := startH3Upstream(t, ca, false, "h2.test")

	r := h3get.Fetch(h3get.Request{URL: "https://h3.test/direct", CA: ca.pemPath, Addr: fmt.Sprintf("127.0.0.1:%d", h3u.port), Mark: "m1"})
	if r.Status != 200 || r.Proto != "HTTP/3.0" || !strings.Contains(r.Body, "upstream-saw proto=HTTP/3.0 path=/direct mark=m1") {
		t.Errorf("quic-go to the h3 upstream: %+v", r)
	}
	r = h3get.Fetch(h3get.Request{URL: "https://h2.test/direct", CA: ca.pemPath, Addr: fmt.Sprintf("127.0.0.1:%d", h2u.port), Timeout: 5 * time.Second})
	if !r.Refused || r.Millis > 1000 {
		t.Errorf("quic-go to the HTTP/2-only upstream: want connection refused within a second, got %+v", r)
	}

	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(ca.pemPath)
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "h3.test"},
		ForceAttemptHTTP2: true,
	}, Timeout: 10 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/tcp", h3u.port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/2.0" || !strings.Contains(resp.Header.Get("Alt-Svc"), `h3=":443"`) {
		t.Errorf("the h3 upstream over TCP: %s, Alt-Svc %q", resp.Proto, resp.Header.Get("Alt-Svc"))
	}

	t.Run("chromium", func(t *testing.T) {
		needChromium(t)
		origin := fmt.Sprintf("h3.test:%d", h3u.port)
		resolve := "--host-resolver-rules=MAP h3.test 127.0.0.1"
		for _, c := range []struct {
			why, path, want string
			extra           []string
		}{
			{"forced QUIC to a locally trusted root", "/forced", "proto=HTTP/3.0", []string{"--origin-to-force-quic-on=" + origin}},
			{"no QUIC for the first load of an origin", "/unforced", "proto=HTTP/2.0", nil},
		} {
			prof, err := harness.NewChromium(t.TempDir(), ca.pemPath)
			if err != nil {
				t.Fatal(err)
			}
			dom, err := runChromium(exec.CommandContext, prof, "https://"+origin+c.path, append([]string{resolve}, c.extra...)...)
			if err != nil || !strings.Contains(dom, c.want+" path="+c.path) {
				t.Errorf("%s: want %q in the page: %v\n%s", c.why, c.want, err, dom)
			}
		}
	})
}

func TestHTTP3QuicGoClient(t *testing.T) {
	e := startH3(t, "", envOptions{})
	for _, c := range []struct {
		why, url, upstream string
		u                  *h3Upstream
	}{
		{"an upstream that speaks HTTP/3 is reached over it", "https://h3.test/via-h3", "HTTP/3.0", e.h3},
		{"an HTTP/2-only upstream is reached over TCP", "https://h2.test/via-h2", "HTTP/2.0", e.h2},
	} {
		r := e.h3Get(h3get.Request{URL: c.url, Mark: "go-" + c.upstream})
		path := c.url[strings.LastIndex(c.url, "/"):]
		if r.Status != 200 || r.Proto != "HTTP/3.0" || !strings.Contains(r.Body, "upstream-saw proto="+c.upstream+" path="+path+" mark=go-"+c.upstream) {
			t.Errorf("%s: %+v", c.why, r)
		}
		if got := c.u.saw(path); len(got) != 1 || got[0] != c.upstream {
			t.Errorf("%s: the upstream saw %v", c.why, got)
		}
	}
	evs := e.stop()
	for _, c := range []struct{ domain, path string }{{"h3.test", "/via-h3"}, {"h2.test", "/via-h2"}} {
		n := httpEvent(evs, "GET", c.path)
		if n == nil || n.HTTPVersion != store.HTTP3 || n.StatusCode != 200 || n.Decision != store.Allowed || n.Domain != c.domain {
			t.Errorf("GET %s: want an allowed HTTP/3 request event, got %+v\n%s", c.path, n, dumpEvents(evs))
		}
		flow := netEvent(evs, func(n *store.Net) bool {
			return n.Method == "" && n.Domain == c.domain && n.Transport == store.TransportUDP && n.ConnType == store.ConnQUIC
		})
		if flow == nil || flow.Decision != store.Allowed || flow.Port != 443 || flow.BytesReceived == 0 {
			t.Errorf("%s: want an allowed udp/quic flow event on 443 with bytes, got %+v\n%s", c.domain, flow, dumpEvents(evs))
		}
	}
	db := claudeExport(t, e.dataDir)
	var version, connType, transport string
	if err := db.QueryRow(`SELECT http_version FROM net_events WHERE path = '/via-h3'`).Scan(&version); err != nil || version != store.HTTP3 {
		t.Errorf("export: http_version of GET /via-h3 = %q (%v), want %s", version, err, store.HTTP3)
	}
	if err := db.QueryRow(`SELECT conn_type, transport FROM net_events WHERE domain = 'h3.test' AND method IS NULL AND transport = 'udp'`).Scan(&connType, &transport); err != nil || connType != string(store.ConnQUIC) {
		t.Errorf("export: the h3.test flow row: conn_type %q transport %q (%v)", connType, transport, err)
	}
}

func TestHTTP3DeniedPath403(t *testing.T) {
	e := startH3(t, "", envOptions{})
	r := e.h3Get(h3get.Request{URL: "https://h3.test/admin/users"})
	if r.Status != 403 || r.Proto != "HTTP/3.0" || !strings.Contains(r.Body, "capsem blocked this request") || strings.Contains(r.Body, "upstream-saw") {
		t.Errorf("GET /admin/users over HTTP/3: want capsem's 403, got %+v", r)
	}
	if got := e.h3.saw("/admin/users"); len(got) != 0 {
		t.Errorf("the denied request reached the upstream over %v", got)
	}
	evs := e.stop()
	n := httpEvent(evs, "GET", "/admin/users")
	if n == nil || n.Decision != store.Denied || n.StatusCode != 403 || n.Reason != mitm.ReasonHTTPDenied || n.MatchedRule == "" || n.HTTPVersion != store.HTTP3 {
		t.Errorf("want a denied HTTP/3 request event with its rule, got %+v\n%s", n, dumpEvents(evs))
	}
}

func TestHTTP3SNIMismatchRefused(t *testing.T) {
	e := startH3(t, "", envOptions{})
	// h3.test's address, h2.test's name: both allowed, but not the name
	// the guest resolved for that address.
	r := e.h3Get(h3get.Request{URL: "https://h3.test/sni", SNI: "h2.test", Timeout: 10 * time.Second})
	t.Logf("the quic-go client with a mismatched SNI: %+v", r)
	if r.Err == "" || r.Status != 0 {
		t.Errorf("a QUIC handshake naming another server than the resolved one: want a failed dial, got %+v", r)
	}
	// Refused, not left to time out: the handshake timeout is 10 s.
	if r.Millis > 3000 {
		t.Errorf("the refused dial took %d ms; want it to fail fast", r.Millis)
	}
	if got := append(e.h3.saw("/sni"), e.h2.saw("/sni")...); len(got) != 0 {
		t.Errorf("the request reached an upstream over %v", got)
	}
	evs := e.stop()
	n := netEvent(evs, func(n *store.Net) bool { return n.Reason == mitm.ReasonSNIMismatch })
	if n == nil || n.Decision != store.Denied || n.Transport != store.TransportUDP || n.Port != 443 {
		t.Errorf("want a denied udp event with reason %s, got %+v\n%s", mitm.ReasonSNIMismatch, n, dumpEvents(evs))
	}
}

// TestHTTP3ZeroRTTRefused: a client with a ticket from its first connection
// dials again early, ready to send its request as 0-RTT data, which an
// attacker on the path could replay. The MITM allows no early data (and
// each flow's listener has ticket keys of its own, so the ticket resumes
// nothing): the request waits for the handshake and is sent once. With
// Allow0RTT on, the second request fails here ("0-RTT rejected").
func TestHTTP3ZeroRTTRefused(t *testing.T) {
	e := startH3(t, "", envOptions{})
	r := e.h3Get(h3get.Request{URL: "https://h3.test/zero-rtt", Mark: "z", Resume: true})
	t.Logf("the quic-go client resuming with 0-RTT: %+v; again: %+v", r, r.Again)
	if r.Status != 200 || r.Again == nil || r.Again.Status != 200 || r.Again.Proto != "HTTP/3.0" {
		t.Fatalf("want both requests answered over HTTP/3, got %+v", r)
	}
	if r.Again.Used0RTT {
		t.Errorf("the resumed connection carried its request as 0-RTT data: %+v", r.Again)
	}
	if got := e.h3.saw("/zero-rtt"); len(got) != 2 {
		t.Errorf("the upstream saw the two requests as %v, want each once", got)
	}
	evs := e.stop()
	n := 0
	for _, ev := range evs {
		if ev.Net != nil && ev.Net.Method == "GET" && ev.Net.Path == "/zero-rtt" && ev.Net.HTTPVersion == store.HTTP3 {
			n++
		}
	}
	if n != 2 {
		t.Errorf("want 2 HTTP/3 request events for /zero-rtt, got %d\n%s", n, dumpEvents(evs))
	}
}

// TestHTTP3MigrationRefused: quic-go's client moves its connection to
// another local port (active migration, PATH_CHALLENGE from the new port).
// The netstack follows no flow to a new port, so the path is never
// validated, the drop is recorded, and the connection goes on where it was.
func TestHTTP3MigrationRefused(t *testing.T) {
	e := startH3(t, "", envOptions{})
	r := e.h3Get(h3get.Request{URL: "https://h3.test/migrate", Migrate: true})
	t.Logf("the quic-go client migrating: %+v; again: %+v", r, r.Again)
	if r.Status != 200 || r.PathErr == "" {
		t.Errorf("want the first request answered and the new path never validated, got %+v", r)
	}
	if r.Again == nil || r.Again.Status != 200 {
		t.Errorf("want the connection still served on its first path, got %+v", r.Again)
	}
	if got := e.h3.saw("/migrate"); len(got) != 2 {
		t.Errorf("the upstream saw %v, want the two requests of the one path", got)
	}
	evs := e.stop()
	n := netEvent(evs, func(n *store.Net) bool {
		return n.Reason == netstack.ReasonUDPNotAllowed && n.Port == 443 && strings.Contains(n.Detail, "migration")
	})
	if n == nil || n.Decision != store.Denied || n.Transport != store.TransportUDP {
		t.Errorf("want the new path's datagrams dropped as %s, got %+v\n%s", netstack.ReasonUDPNotAllowed, n, dumpEvents(evs))
	}
}

// TestHTTP3OtherPortRefused: quic-go's client dials h3.test, allowed on
// 443 only, on port 8443. The Initial is decided as the SYN to 8443 would
// be: port-not-allowed, refused at once with ICMP port unreachable, so the
// client gives up at once rather than wait out its handshake timeout, as
// it would for a datagram silently dropped.
func TestHTTP3OtherPortRefused(t *testing.T) {
	e := startH3(t, "", envOptions{})
	r := e.h3Get(h3get.Request{URL: "https://h3.test:8443/other-port", Timeout: 10 * time.Second})
	t.Logf("the quic-go client to port 8443: %+v", r)
	if !r.Refused || r.Status != 0 {
		t.Errorf("QUIC to a port the policy does not allow: want connection refused (ICMP port unreachable), got %+v", r)
	}
	if r.Millis > 1000 {
		t.Errorf("the refused QUIC client took %d ms to fail; want under a second", r.Millis)
	}
	evs := e.stop()
	n := netEvent(evs, func(n *store.Net) bool { return n.Port == 8443 })
	if n == nil || n.Reason != policy.ReasonPortNotAllowed || n.Decision != store.Denied || n.Transport != store.TransportUDP || n.Domain != "h3.test" || n.ConnType != store.ConnQUIC {
		t.Errorf("want a denied udp/quic event with reason %s for h3.test:8443, got %+v\n%s", policy.ReasonPortNotAllowed, n, dumpEvents(evs))
	}
}

// TestHTTP3BlockMode needs no MITM: under [quic] mode = "block" the
// netstack refuses every Initial with ICMP port unreachable.
func TestHTTP3BlockMode(t *testing.T) {
	e := startH3(t, "\n[quic]\nmode = \"block\"\n", envOptions{})
	r := e.h3Get(h3get.Request{URL: "https://h3.test/blocked", Timeout: 10 * time.Second})
	t.Logf("the quic-go client under block mode: %+v", r)
	if !r.Refused || r.Status != 0 {
		t.Errorf("QUIC under block mode: want connection refused (ICMP port unreachable), got %+v", r)
	}
	if r.Millis > 1000 {
		t.Errorf("the blocked QUIC client took %d ms to fail; want under a second", r.Millis)
	}
	// The upstream offers h3 in Alt-Svc (TestHTTP3UpstreamsDirect); under
	// block mode the MITM drops the offer, so clients stop trying QUIC.
	hdr, err := e.runEnv(30*time.Second, e.trustEnv(), "curl", "-sS", "--max-time", "20", "-D", "-", "-o", "/dev/null", "https://h3.test/alt-svc")
	if err != nil || !strings.Contains(hdr, " 200") || strings.Contains(hdr, "h3=") {
		t.Errorf("want a 200 without h3 in Alt-Svc: %v\n%s", err, hdr)
	}
	chromiumRan := false
	t.Run("unforced chromium loads over TCP", func(t *testing.T) {
		needChromium(t)
		chromiumRan = true
		dom, err := e.chromium("https://h3.test/page-tcp")
		if err != nil || !strings.Contains(dom, "upstream-saw proto=HTTP/2.0 path=/page-tcp") {
			t.Errorf("want the page, reached over TCP: %v\n%s", err, dom)
		}
	})
	evs := e.stop()
	n := netEvent(evs, func(n *store.Net) bool { return n.Reason == netstack.ReasonQUICBlocked })
	if n == nil || n.Decision != store.Denied || n.Transport != store.TransportUDP || n.Domain != "h3.test" || n.ConnType != store.ConnQUIC {
		t.Errorf("want a denied udp/quic event with reason %s for h3.test, got %+v\n%s", netstack.ReasonQUICBlocked, n, dumpEvents(evs))
	}
	if chromiumRan {
		p := httpEvent(evs, "GET", "/page-tcp")
		if p == nil || p.Transport != store.TransportTCP || (p.HTTPVersion != store.HTTP2 && p.HTTPVersion != store.HTTP11) {
			t.Errorf("chromium's page: want a request over TCP (HTTP/2 or HTTP/1.1), got %+v\n%s", p, dumpEvents(evs))
		}
	}
}

func TestHTTP3Chromium(t *testing.T) {
	needChromium(t)
	e := startH3(t, "", envOptions{})
	dom, err := e.chromium("https://h3.test/page-quic", "--origin-to-force-quic-on=h3.test:443")
	if err != nil || !strings.Contains(dom, "path=/page-quic") {
		t.Errorf("forced chromium: want the page: %v\n%s", err, dom)
	}
	evs := e.stop()
	n := httpEvent(evs, "GET", "/page-quic")
	if n == nil || n.HTTPVersion != store.HTTP3 || n.StatusCode != 200 || n.Decision != store.Allowed {
		t.Errorf("want an allowed HTTP/3 request event for chromium's page, got %+v\n%s", n, dumpEvents(evs))
	}
}

func TestHTTP3PCAPShowsUDPBothWays(t *testing.T) {
	pcapPath := t.TempDir() + "/h3.pcap"
	e := startH3(t, "", envOptions{extraArgs: []string{"--pcap", pcapPath}})
	if r := e.h3Get(h3get.Request{URL: "https://h3.test/pcap"}); r.Status != 200 {
		t.Fatalf("GET /pcap: %+v", r)
	}
	e.stop()
	r := openPCAP(t, pcapPath)
	toUpstream, toGuest := 0, 0
	src := gopacket.NewPacketSource(r, r.LinkType())
	for p := range src.Packets() {
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		switch {
		case udp == nil:
		case udp.DstPort == 443:
			toUpstream++
		case udp.SrcPort == 443:
			toGuest++
		}
	}
	t.Logf("pcap: %d UDP datagrams to port 443, %d from it", toUpstream, toGuest)
	if toUpstream == 0 || toGuest == 0 {
		t.Errorf("pcap has %d UDP datagrams to port 443 and %d from it; want both", toUpstream, toGuest)
	}
}
