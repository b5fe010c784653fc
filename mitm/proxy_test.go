package mitm

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// memRecorder keeps events in memory; when admitErr is set it refuses, as
// store.Writer does when the store cannot write.
type memRecorder struct {
	mu       sync.Mutex
	evs      []store.Event
	admitErr error
}

func (m *memRecorder) Append(ev store.Event) {
	m.mu.Lock()
	m.evs = append(m.evs, ev)
	m.mu.Unlock()
}

func (m *memRecorder) Admit() error { return m.admitErr }

func (m *memRecorder) net() []*store.Net {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*store.Net
	for _, ev := range m.evs {
		if ev.Net != nil {
			out = append(out, ev.Net)
		}
	}
	return out
}

// testProxy is a MITM in the test process, an upstream for api.test on
// loopback, and a way to open intercepted guest connections to it.
type testProxy struct {
	t        *testing.T
	p        *Proxy
	guestCA  *x509.CertPool
	upstream string
	// upstreamCert is the upstream's leaf for api.test, which the proxy's
	// roots trust: an HTTP/3 upstream of a test uses it too.
	upstreamCert tls.Certificate
	pol          atomic.Pointer[policy.Policy] // what the flow's Current returns
	hits         atomic.Int64                  // requests the upstream served
	handshakes   atomic.Int64                  // TLS handshakes the upstream completed
	srv          *httptest.Server
}

func startTestProxy(t *testing.T, rec netstack.Recorder, h http.Handler) *testProxy {
	t.Helper()
	return startTestProxyWith(t, rec, h, nil)
}

// startTestProxyWith is startTestProxy with tweak, when not nil, changing
// the proxy's Config before it is made.
func startTestProxyWith(t *testing.T, rec netstack.Recorder, h http.Handler, tweak func(*Config)) *testProxy {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "api.test"},
		DNSNames:     []string{"api.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(cert)

	tp := &testProxy{t: t}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tp.upstreamCert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{tp.upstreamCert},
		VerifyConnection: func(tls.ConnectionState) error { tp.handshakes.Add(1); return nil }}
	srv.StartTLS()
	tp.srv = srv
	t.Cleanup(srv.Close)
	tp.upstream = srv.Listener.Addr().String()

	authority, err := ca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tp.guestCA = x509.NewCertPool()
	tp.guestCA.AddCert(authority.Certificate())
	pol, err := policy.Parse("test.toml", []byte(`
[network]
default = "deny"
allow = ["api.test:443"]

[[http]]
host = "api.test"
paths = ["/admin/*"]
action = "deny"
`))
	if err != nil {
		t.Fatal(err)
	}
	tp.pol.Store(pol)
	cfg := Config{CA: authority, Recorder: rec, SystemRoots: roots}
	if tweak != nil {
		tweak(&cfg)
	}
	tp.p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.p.Close() })
	return tp
}

// dial opens an intercepted connection, as a guest would, speaking alpn.
func (tp *testProxy) dial(alpn string) *tls.Conn {
	tp.t.Helper()
	return tp.dialWith(&tls.Config{NextProtos: []string{alpn}})
}

// dialWith opens an intercepted connection with the guest's TLS settings
// in cfg (ServerName and RootCAs are filled in).
func (tp *testProxy) dialWith(cfg *tls.Config) *tls.Conn {
	tp.t.Helper()
	up, err := net.Dial("tcp", tp.upstream)
	if err != nil {
		tp.t.Fatal(err)
	}
	f := tp.flow()
	f.Dialed = tp.pol.Load() // as the stack does: up was dialled under the policy at the SYN
	return tp.dialFlow(f, up, cfg)
}

// dialFlow opens an intercepted connection for the flow f whose upstream
// the stack dialled is up (nil: none).
func (tp *testProxy) dialFlow(f *netstack.Flow, up net.Conn, cfg *tls.Config) *tls.Conn {
	tp.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tp.t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tp.t.Fatal(err)
	}
	guest, err := ln.Accept()
	if err != nil {
		tp.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.p.HandleFlow(ctx, guest, up, f)
		guest.Close()
	}()
	tp.t.Cleanup(func() { cancel(); <-done })
	cfg.ServerName, cfg.RootCAs = "api.test", tp.guestCA
	tc := tls.Client(client, cfg)
	if err := tc.Handshake(); err != nil {
		tp.t.Fatal(err)
	}
	tp.t.Cleanup(func() { tc.Close() })
	return tc
}

// flow is the netstack.Flow of a guest connection to api.test.
func (tp *testProxy) flow() *netstack.Flow {
	return &netstack.Flow{
		Name: "api.test", Port: 443,
		Current: tp.pol.Load,
		Redial: func(ctx context.Context, _ *policy.Policy) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", tp.upstream)
		},
	}
}

// roundTrip writes raw request bytes on c and reads one response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func hello(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "hello from the upstream via %s", r.Proto)
}

// waitNet waits for the event of the request to path (events are
// appended when the handler ends, after the guest has the response).
func waitNet(t *testing.T, rec *memRecorder, path string) *store.Net {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, n := range rec.net() {
			if n.Path == path {
				return n
			}
		}
	}
	t.Fatalf("no event for %s", path)
	return nil
}

func TestStoreUnavailableRefusesRequests(t *testing.T) {
	rec := &memRecorder{admitErr: fmt.Errorf("%w: session s1: writing to the store failed (no space left on device)", store.ErrNotRecording)}
	tp := startTestProxy(t, rec, http.HandlerFunc(hello))
	for _, alpn := range []string{"http/1.1", "h2"} {
		c := tp.dial(alpn)
		resp, body := guestGet(t, c, alpn, "/hello?via="+alpn)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Capsem-Blocked") != ReasonStoreUnavailable ||
			!strings.Contains(body, "cannot record") || !strings.Contains(body, "free space") || !strings.Contains(body, "no space left on device") {
			t.Errorf("%s: %d %q", alpn, resp.StatusCode, body)
		}
	}
	if n := tp.hits.Load(); n != 0 {
		t.Errorf("the upstream served %d requests while the store could not record", n)
	}
	n := waitNet(t, rec, "/hello")
	if n.Decision != store.Denied || n.Reason != ReasonStoreUnavailable || n.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("event: %+v", n)
	}

	// Once the store records again, requests pass.
	rec.mu.Lock()
	rec.admitErr = nil
	rec.mu.Unlock()
	c := tp.dial("http/1.1")
	if resp, body := guestGet(t, c, "http/1.1", "/hello"); resp.StatusCode != 200 || !strings.Contains(body, "hello from the upstream") {
		t.Errorf("after the store recovered: %d %q", resp.StatusCode, body)
	}
}

// guestGet sends GET path on c with HTTP/1.1 or HTTP/2.
func guestGet(t *testing.T, c *tls.Conn, alpn, path string) (*http.Response, string) {
	t.Helper()
	if alpn == "http/1.1" {
		return roundTrip(t, c, bufio.NewReader(c), "GET "+path+" HTTP/1.1\r\nHost: api.test\r\n\r\n")
	}
	tr := &http.Transport{
		ForceAttemptHTTP2: true,
		DialTLSContext:    func(context.Context, string, string) (net.Conn, error) { return c, nil },
	}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(httptestRequest("https://api.test" + path))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func httptestRequest(url string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, url, nil)
	return r
}

// TestH1UpgradeStrippedInProcess runs the upgrade policy through the
// proxy: an h2c upgrade is forwarded without its Upgrade, the request is
// recorded in wire order with what was stripped, and the upstream's
// answer to the next request on the connection is policed.
func TestH1UpgradeStrippedInProcess(t *testing.T) {
	rec := &memRecorder{}
	var gotUpgrade atomic.Value
	tp := startTestProxy(t, rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUpgrade.Store(r.Header.Get("Upgrade") + "|" + r.Header.Get("Http2-Settings"))
		hello(w, r)
	}))
	c := tp.dial("http/1.1")
	br := bufio.NewReader(c)
	resp, _ := roundTrip(t, c, br, "GET /hello HTTP/1.1\r\nZeta: z\r\nHost: api.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nAlpha: a\r\n\r\n")
	if resp.StatusCode != 200 || gotUpgrade.Load() != "|" {
		t.Fatalf("status %d, upstream saw Upgrade|HTTP2-Settings = %q", resp.StatusCode, gotUpgrade.Load())
	}
	resp, body := roundTrip(t, c, br, "GET /admin/x HTTP/1.1\r\nHost: api.test\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, "capsem blocked") {
		t.Errorf("the next request: %d %q", resp.StatusCode, body)
	}
	n := waitNet(t, rec, "/hello")
	var names []string
	for _, h := range n.RequestHeaders {
		names = append(names, h.Name)
	}
	if got := strings.Join(names, ","); got != "Zeta,Host,Connection,Upgrade,Http2-Settings,Alpha" {
		t.Errorf("request headers in order %s", got)
	}
	if !strings.Contains(n.Detail, "stripped Upgrade: h2c, HTTP2-Settings") {
		t.Errorf("detail %q", n.Detail)
	}
	if n.HTTPVersion != store.HTTP11 {
		t.Errorf("http version %q, want %q (the guest's, not h2c's)", n.HTTPVersion, store.HTTP11)
	}
}

// TestH2RequestHeadersInWireOrder: over HTTP/2 the request's fields are
// recorded in the order of the guest's header block.
func TestH2RequestHeadersInWireOrder(t *testing.T) {
	rec := &memRecorder{}
	tp := startTestProxy(t, rec, http.HandlerFunc(hello))
	c := tp.dial("h2")
	if _, err := c.Write(h2Frames(t, 1<<14, false, hf(":method", "GET", ":scheme", "https", ":authority", "api.test", ":path", "/h2",
		"zeta", "1", "user-agent", "test", "alpha", "2", "zeta", "3"))); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var status, body string
	for done := false; !done; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			status = f.PseudoValue("status")
			done = f.StreamEnded()
		case *http2.DataFrame:
			body += string(f.Data())
			done = f.StreamEnded()
		}
	}
	if status != "200" || !strings.Contains(body, "hello from the upstream") {
		t.Fatalf("%s %q", status, body)
	}
	n := waitNet(t, rec, "/h2")
	var got []string
	for _, h := range n.RequestHeaders {
		got = append(got, h.Name+"="+h.Value)
	}
	if s := strings.Join(got, ","); s != "Zeta=1,User-Agent=test,Alpha=2,Zeta=3" {
		t.Errorf("request headers %s", s)
	}
	if n.HTTPVersion != store.HTTP2 {
		t.Errorf("http version %q, want %q", n.HTTPVersion, store.HTTP2)
	}
}

// TestReloadMidExchangeKeepsTheRequestsPolicy: a reload that lands while
// the upstream answers does not change the policy the exchange follows —
// the response's preview is kept under the policy the request was decided
// by, not the one in force when the response came.
func TestReloadMidExchangeKeepsTheRequestsPolicy(t *testing.T) {
	noPreview, err := policy.Parse("reloaded.toml", []byte(`
[network]
default = "deny"
allow = ["api.test:443"]

[mitm]
preview_bytes = 0
`))
	if err != nil {
		t.Fatal(err)
	}
	rec := &memRecorder{}
	var tp *testProxy
	tp = startTestProxy(t, rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.pol.Store(noPreview) // the reload, between the request and its response
		hello(w, r)
	}))
	first := tp.pol.Load()
	for _, alpn := range []string{"http/1.1", "h2"} {
		tp.pol.Store(first)
		c := tp.dial(alpn)
		path := "/reload-" + alpn
		if resp, _ := guestGet(t, c, alpn, path); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", alpn, resp.StatusCode)
		}
		n := waitNet(t, rec, path)
		if !strings.Contains(n.ResponseBodyPreview, "hello from the upstream") {
			t.Errorf("%s: response preview %q: the reload's preview_bytes = 0 was applied to a request decided before it", alpn, n.ResponseBodyPreview)
		}
	}
}
