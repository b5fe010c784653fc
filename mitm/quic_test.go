package mitm

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/capsem/capsem/mitm/upstream"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// quicFlow runs HandleQUIC on a loopback UDP socket standing in for the
// netstack's per-flow PacketConn, and returns an HTTP/3 client (quic-go's)
// that speaks to it as the guest with the given SNI.
func (tp *testProxy) quicFlow(t *testing.T, sni string, upstream ...netip.AddrPort) (*http.Client, <-chan netstack.FlowResult) {
	t.Helper()
	addr, done := tp.quicFlowAddr(t, upstream...)
	rt := &http3.Transport{
		TLSClientConfig: &tls.Config{ServerName: sni, RootCAs: tp.guestCA},
		Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr, tlsCfg, cfg)
		},
	}
	t.Cleanup(func() { rt.Close() })
	return &http.Client{Transport: rt, Timeout: 10 * time.Second}, done
}

// quicFlowAddr runs HandleQUIC for one flow to api.test on a loopback UDP
// socket and returns the socket's address.
func (tp *testProxy) quicFlowAddr(t *testing.T, upstream ...netip.AddrPort) (string, <-chan netstack.FlowResult) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := tp.flow()
	f.Transport = store.TransportUDP
	if upstream != nil {
		f.Upstream = func(context.Context, *policy.Policy) ([]netip.AddrPort, error) { return upstream, nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan netstack.FlowResult, 1)
	go func() {
		done <- tp.p.HandleQUIC(ctx, pc, f)
		pc.Close()
	}()
	t.Cleanup(cancel)
	return pc.LocalAddr().String(), done
}

func TestHTTP3ThroughTheMITM(t *testing.T) {
	rec := &memRecorder{}
	tp := startTestProxy(t, rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Alt-Svc", `h3=":443"; ma=60`)
		io.WriteString(w, "upstream saw "+r.Proto)
	}))
	cl, done := tp.quicFlow(t, "api.test")

	resp, err := cl.Get("https://api.test/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 3 || string(body) != "upstream saw HTTP/2.0" {
		t.Errorf("GET over HTTP/3: %s %q, want an HTTP/3 response forwarded over HTTP/2", resp.Proto, body)
	}
	if resp.Header.Get("Alt-Svc") == "" {
		t.Errorf("Alt-Svc was dropped in intercept mode")
	}
	resp, err = cl.Get("https://api.test/admin/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "capsem blocked this request") {
		t.Errorf("a path an [[http]] rule denies, over HTTP/3: %d %.200q", resp.StatusCode, body)
	}
	ev := waitNet(t, rec, "/hello")
	if ev.HTTPVersion != store.HTTP3 || ev.Transport != store.TransportUDP || ev.Decision != store.Allowed {
		t.Errorf("the request's event: version %q transport %q decision %q", ev.HTTPVersion, ev.Transport, ev.Decision)
	}
	cl.Transport.(*http3.Transport).Close()
	select {
	case res := <-done:
		if res.ConnType != store.ConnQUIC || res.Refused != "" || res.BytesSent == 0 || res.BytesReceived == 0 {
			t.Errorf("flow result %+v", res)
		}
	case <-time.After(quicIdle + 5*time.Second):
		t.Fatal("the flow did not end after the guest closed its connection")
	}
}

func TestHTTP3SNIMismatchRefused(t *testing.T) {
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
	cl, done := tp.quicFlow(t, "other.test")
	start := time.Now()
	go cl.Get("https://other.test/")
	select {
	case res := <-done:
		if res.Refused != ReasonSNIMismatch || !strings.Contains(res.Err.Error(), `"other.test"`) {
			t.Errorf("flow result %+v, want refused %s", res, ReasonSNIMismatch)
		}
	case <-time.After(HelloTimeout + 5*time.Second):
		t.Fatal("the flow was not refused")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused after %v: the SNI is known with the first Initials", d)
	}
}

func TestHTTP3UpstreamOverHTTP3WhenItAnswers(t *testing.T) {
	rec := &memRecorder{}
	tp := startTestProxy(t, rec, http.HandlerFunc(hello))
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h3 := &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{tp.upstreamCert}}),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "h3 upstream saw "+r.Proto)
		}),
	}
	go h3.Serve(udp)
	t.Cleanup(func() { h3.Close(); udp.Close() })
	up := netip.MustParseAddrPort(udp.LocalAddr().String())

	cl, _ := tp.quicFlow(t, "api.test", up)
	for i := range 2 {
		resp, err := cl.Get("https://api.test/h3")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "h3 upstream saw HTTP/3.0" {
			t.Errorf("request %d: %q, want it forwarded over HTTP/3 to an upstream that answers QUIC", i, body)
		}
	}
	if q, known := tp.p.up.AnsweredQUIC("api.test"); !q || !known {
		t.Errorf("api.test not remembered as answering QUIC")
	}
	// After a reload the flow's QUIC connection, dialled under the policy
	// before, carries none of the requests decided under the new one.
	reloaded, err := policy.Parse("reloaded.toml", []byte("[network]\ndefault = \"deny\"\nallow = [\"api.test:443\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tp.pol.Store(reloaded)
	resp, err := cl.Get("https://api.test/after-reload")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "h3 upstream") {
		t.Errorf("a request decided after a reload went over the QUIC connection dialled before it: %q", body)
	}

	// An upstream that does not answer QUIC costs the probe once, then is
	// remembered: the next flow goes over TCP at once.
	rec2 := &memRecorder{}
	tp2 := startTestProxy(t, rec2, http.HandlerFunc(hello))
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cl2, _ := tp2.quicFlow(t, "api.test", netip.MustParseAddrPort(silent.LocalAddr().String()))
	for i, limit := range []time.Duration{upstream.H3Probe + 2*time.Second, 200 * time.Millisecond} {
		start := time.Now()
		resp, err := cl2.Get("https://api.test/tcp")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if d := time.Since(start); !strings.Contains(string(body), "HTTP/2.0") || d > limit {
			t.Errorf("request %d to a silent QUIC upstream: %q after %v, want HTTP/2 within %v", i, body, d, limit)
		}
	}
}

func TestHTTP3OneConnectionPerFlow(t *testing.T) {
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := tp.flow()
	f.Transport = store.TransportUDP
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan netstack.FlowResult, 1)
	go func() { done <- tp.p.HandleQUIC(ctx, pc, f); pc.Close() }()
	t.Cleanup(func() { cancel(); <-done })
	tlsConf := &tls.Config{ServerName: "api.test", RootCAs: tp.guestCA, NextProtos: []string{http3.NextProtoH3}}
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	first, err := quic.DialAddr(dctx, pc.LocalAddr().String(), tlsConf, nil)
	if err != nil {
		t.Fatalf("the flow's connection: %v", err)
	}
	defer first.CloseWithError(0, "")
	// Another connection ID on the same flow would be another handshake
	// the netstack's caps never counted.
	if second, err := quic.DialAddr(dctx, pc.LocalAddr().String(), tlsConf, nil); err == nil {
		second.CloseWithError(0, "")
		t.Fatal("a second QUIC connection was served on one flow")
	}
}
