package mitm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/capsem/capsem/mitm/upstream"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
)

// TestPoolSharesUpstreamConnections: guest connections that each send one
// request and close share the upstream connections of the earlier ones —
// one upstream TLS handshake, not one per guest connection.
func TestPoolSharesUpstreamConnections(t *testing.T) {
	for _, tc := range []struct {
		alpn string
		why  string
	}{
		{"http/1.1", "the HTTP/1.1 path puts a connection whose response was read to the end back in the pool"},
		{"h2", "HTTP/2 guests share the pool's http.Transport, and so its HTTP/2 connection"},
	} {
		t.Run(tc.alpn, func(t *testing.T) {
			tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
			const n = 5
			for i := range n {
				c := tp.dial(tc.alpn)
				if resp, body := guestGet(t, c, tc.alpn, "/hello"); resp.StatusCode != 200 || !strings.Contains(body, "hello from the upstream") {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
				}
				c.Close()
			}
			if got := tp.hits.Load(); got != n {
				t.Errorf("the upstream served %d requests, want %d", got, n)
			}
			if got := tp.handshakes.Load(); got != 1 {
				t.Errorf("%d upstream TLS handshakes for %d guest connections of one request each, want 1: %s", got, n, tc.why)
			}
		})
	}
}

// TestPoolKeepsPoliciesApart: a request decided under a reloaded policy
// never goes over a connection opened under the policy before it (whose
// ca_files and resolve targets may differ).
func TestPoolKeepsPoliciesApart(t *testing.T) {
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
	get := func(what string) {
		t.Helper()
		c := tp.dial("http/1.1")
		defer c.Close()
		if resp, _ := guestGet(t, c, "http/1.1", "/hello"); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", what, resp.StatusCode)
		}
	}
	get("first")
	get("second, same policy")
	if got := tp.handshakes.Load(); got != 1 {
		t.Fatalf("%d handshakes under one policy, want 1", got)
	}
	reloaded, err := policy.Parse("reloaded.toml", []byte("[network]\ndefault = \"deny\"\nallow = [\"api.test:443\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tp.pol.Store(reloaded)
	get("after the reload")
	if got := tp.handshakes.Load(); got != 2 {
		t.Errorf("%d handshakes after a reload, want 2: the reloaded policy's request went over the old policy's connection", got)
	}
}

// TestPoolPreDialedConnectionKeepsItsPolicy: the connection the stack
// dialled at the guest's SYN belongs to the policy in force then. A reload
// before the guest's ClientHello (which the guest may hold back for 15 s)
// must not let it carry requests decided under the reloaded policy, nor join
// that policy's pool, where other guest connections would use it.
func TestPoolPreDialedConnectionKeepsItsPolicy(t *testing.T) {
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
	atSYN := tp.pol.Load()
	up, err := net.Dial("tcp", tp.upstream) // the stack's dial, under atSYN
	if err != nil {
		t.Fatal(err)
	}
	reloaded, err := policy.Parse("reloaded.toml", []byte("[network]\ndefault = \"deny\"\nallow = [\"api.test:443\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tp.pol.Store(reloaded)
	var mu sync.Mutex
	var redials []*policy.Policy
	f := tp.flow()
	f.Dialed = atSYN
	f.Redial = func(ctx context.Context, pol *policy.Policy) (net.Conn, error) {
		mu.Lock()
		redials = append(redials, pol)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", tp.upstream)
	}
	c := tp.dialFlow(f, up, &tls.Config{NextProtos: []string{"http/1.1"}})
	if resp, _ := guestGet(t, c, "http/1.1", "/hello"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(redials) != 1 || redials[0] != reloaded {
		t.Errorf("dials for the request decided after the reload: %d, under the reloaded policy: %v; want one, under it (the connection dialled at the SYN belongs to the policy before)",
			len(redials), len(redials) == 1 && redials[0] == reloaded)
	}
}

// heldWriter holds what is written to it while hold is set and sends it in
// one write at flush: two TLS records in one TCP segment.
type heldWriter struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  bytes.Buffer
}

func (c *heldWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold {
		return c.buf.Write(p)
	}
	return c.Conn.Write(p)
}

func (c *heldWriter) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = false
	c.Conn.Write(c.buf.Bytes())
	c.buf.Reset()
}

// TestPoolDropsAConnectionWithBytesLeftOver: an upstream that sends more
// than the response — here a body after a HEAD answer, as a TLS record of
// its own in the same segment, so that crypto/tls has read it off the
// socket already — leaves a connection that must not go to the next
// request, which would read those bytes as its response.
func TestPoolDropsAConnectionWithBytesLeftOver(t *testing.T) {
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				hw := &heldWriter{Conn: raw}
				tc := tls.Server(hw, &tls.Config{Certificates: []tls.Certificate{tp.upstreamCert}, NextProtos: []string{"http/1.1"}})
				defer tc.Close()
				br := bufio.NewReader(tc)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, r.Body)
					if r.Method == http.MethodHead {
						hw.mu.Lock()
						hw.hold = true
						hw.mu.Unlock()
						io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\n")
						io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\nINJECTED-BYTES")
						hw.flush()
						continue
					}
					body := "the answer to " + r.URL.Path
					fmt.Fprintf(tc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
			}()
		}
	}()
	flow := func() *netstack.Flow {
		f := tp.flow()
		f.Redial = func(ctx context.Context, _ *policy.Policy) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		}
		return f
	}
	f1 := flow()
	f1.Pooled = true
	c1 := tp.dialFlow(f1, nil, &tls.Config{NextProtos: []string{"http/1.1"}})
	io.WriteString(c1, "HEAD /h HTTP/1.1\r\nHost: api.test\r\n\r\n")
	c1.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c1), &http.Request{Method: http.MethodHead}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %v %v", resp, err)
	}
	c1.Close()
	time.Sleep(50 * time.Millisecond) // the HEAD's connection back in the pool, the extra record read in behind it
	f2 := flow()
	f2.Pooled = true
	c2 := tp.dialFlow(f2, nil, &tls.Config{NextProtos: []string{"http/1.1"}})
	if _, body := guestGet(t, c2, "http/1.1", "/private"); body != "the answer to /private" {
		t.Errorf("another guest connection's GET /private got %q; want its own answer, not bytes left over on a pooled connection", body)
	}
}

// TestPoolNeverSharesABusyConnection: two guest connections with a request
// in flight at once each get an upstream connection of their own (an
// HTTP/1.1 connection carries one exchange at a time).
func TestPoolNeverSharesABusyConnection(t *testing.T) {
	var mu sync.Mutex
	remotes := map[string]bool{}
	var slow sync.WaitGroup // the two /slow requests: each waits for the other
	slow.Add(2)
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			mu.Lock()
			remotes[r.RemoteAddr] = true
			mu.Unlock()
			slow.Done()
			slow.Wait()
		}
		hello(w, r)
	}))
	get := func(path string) {
		c := tp.dial("http/1.1")
		defer c.Close()
		if resp, _ := guestGet(t, c, "http/1.1", path); resp.StatusCode != 200 {
			t.Errorf("%s: status %d", path, resp.StatusCode)
		}
	}
	get("/hello") // leaves a connection in the pool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); get("/slow") }()
	}
	wg.Wait()
	if len(remotes) != 2 {
		t.Errorf("the two requests in flight at once reached the upstream over %d connection(s), want 2: %v", len(remotes), remotes)
	}
	if got := tp.handshakes.Load(); got != 2 {
		t.Errorf("%d handshakes, want 2 (the pooled connection and one more)", got)
	}
}

// TestPoolRedialsAClosedConnection: an idle pooled connection the upstream
// closed is not used; the request goes over a new one.
func TestPoolRedialsAClosedConnection(t *testing.T) {
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(hello))
	for i := range 2 {
		c := tp.dial("http/1.1")
		if resp, body := guestGet(t, c, "http/1.1", "/hello"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		c.Close()
		tp.srv.CloseClientConnections() // the upstream drops the idle connection
		time.Sleep(50 * time.Millisecond)
	}
	if got := tp.handshakes.Load(); got != 2 {
		t.Errorf("%d handshakes, want 2", got)
	}
}

// TestPoolBoundsUpstreamConnectionsOfOneGuestConnection: the streams of a
// guest's HTTP/2 connection to an upstream that speaks only HTTP/1.1 need a
// connection each; they get at most upstream.MaxConns, the rest wait for one —
// one guest flow cannot make capsem open hundreds of upstream connections.
func TestPoolBoundsUpstreamConnectionsOfOneGuestConnection(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int64
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inFlight.Add(-1)
		io.WriteString(w, "done")
	}))
	tp.srv.TLS.NextProtos = []string{"http/1.1"} // before any connection: the upstream speaks HTTP/1.1 only

	cc, err := (&http2.Transport{}).NewClientConn(tp.dial("h2")) // one guest connection, all streams on it
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	const streams = upstream.MaxConns + 36 // within the guest server's 250 concurrent streams
	errs := make(chan error, streams)
	for range streams {
		go func() {
			resp, err := cc.RoundTrip(httptestRequest("https://api.test/slow"))
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "done" {
					err = fmt.Errorf("%d %q", resp.StatusCode, body)
				}
			}
			errs <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() < upstream.MaxConns {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests reached the upstream in 10 s, want %d at once", inFlight.Load(), upstream.MaxConns)
		}
		select {
		case err := <-errs:
			t.Fatalf("a request ended before any was let through: %v", err)
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for any beyond the bound to arrive
	if n := tp.handshakes.Load(); n > upstream.MaxConns {
		t.Errorf("%d upstream connections for one guest connection, want at most %d", n, upstream.MaxConns)
	}
	if n := most.Load(); n != upstream.MaxConns {
		t.Errorf("%d requests at the upstream at once, want %d: the rest wait for a connection", n, upstream.MaxConns)
	}
	close(release)
	for range streams {
		if err := <-errs; err != nil {
			t.Errorf("a request: %v", err)
		}
	}
}
