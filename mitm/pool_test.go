package mitm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
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

// TestPoolDroppedWhileBusyClosesItsConnections: a pool pushed out (the
// guest touched poolMaxPools other names) while a request of its runs
// closes that request's upstream connection once the request ends, rather
// than keeping it idle in a transport nobody uses for 90 s.
func TestPoolDroppedWhileBusyClosesItsConnections(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	tp := startTestProxy(t, &memRecorder{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		hello(w, r)
	}))
	c := tp.dial("h2")
	done := make(chan struct{})
	go func() { defer close(done); guestGet(t, c, "h2", "/slow") }()
	<-started
	pol := tp.pol.Load()
	tp.p.pools.mu.Lock()
	up := tp.p.pools.m[poolKey{pol: pol, name: "api.test", port: 443}]
	tp.p.pools.mu.Unlock()
	for i := range poolMaxPools {
		time.Sleep(time.Microsecond) // distinct use times: api.test is the least recently used
		fs := &flowState{flow: &netstack.Flow{Name: fmt.Sprintf("n%d.api.test", i), Port: 443}}
		if _, err := tp.p.pools.lookup(tp.p, fs, pol); err != nil {
			t.Fatal(err)
		}
	}
	if up == nil || !up.dead.Load() {
		t.Fatal("api.test's pool was not pushed out")
	}
	close(release)
	<-done
	c.Close()
	for deadline := time.Now().Add(5 * deadReapEvery); up.h1Open.Load()+up.h2Open.Load() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the dropped pool's transports still hold %d upstream connections open %v after its request ended; want none",
				up.h1Open.Load()+up.h2Open.Load(), 5*deadReapEvery)
		}
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

// TestPoolExpiresIdleConnections: the sweep closes connections idle for
// poolIdleTimeout and drops a pool unused for as long, so that the pools
// of a policy replaced by a reload go away.
func TestPoolExpiresIdleConnections(t *testing.T) {
	conn := func() (*h1Conn, net.Conn) {
		a, b := net.Pipe()
		return &h1Conn{tc: tls.Client(a, &tls.Config{})}, b
	}
	ps := &pools{}
	pol := policy.DenyAll()
	key := poolKey{pol: pol, name: "api.test", port: 443}
	up := newUpstreamPool(ps, key, x509.NewCertPool(), nil)
	ps.m = map[poolKey]*upstreamPool{key: up}

	fresh, freshPeer := conn()
	old, oldPeer := conn()
	up.put(old)
	up.put(fresh)
	long := time.Now().Add(-2 * poolIdleTimeout)
	up.mu.Lock()
	old.idleSince = long
	up.mu.Unlock()
	up.expire()
	if !closedPeer(oldPeer) || closedPeer(freshPeer) {
		t.Fatalf("after a sweep: the connection idle past the timeout closed %v (want true), the fresh one closed %v (want false)", closedPeer(oldPeer), closedPeer(freshPeer))
	}
	if ps.m[key] != up || up.dead.Load() {
		t.Fatal("a pool with a fresh idle connection was dropped")
	}

	up.mu.Lock()
	fresh.idleSince, up.used = long, long
	up.mu.Unlock()
	up.expire()
	if !closedPeer(freshPeer) {
		t.Error("the last connection idle past the timeout was not closed")
	}
	if _, ok := ps.m[key]; ok || !up.dead.Load() {
		t.Error("a pool unused for the idle timeout was kept")
	}
	late, latePeer := conn()
	up.put(late)
	if !closedPeer(latePeer) {
		t.Error("a connection given back to a dropped pool was kept open")
	}
}

// closedPeer says whether the other end of a net.Pipe was closed.
func closedPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

// TestPoolBoundsWhatTheGuestCanMakeItHold: a guest connecting to ever new
// names (any under an allowed wildcard) makes a pool per name; the pools,
// and the idle connections in them, stay bounded, the least recently used
// pool going first.
func TestPoolBoundsWhatTheGuestCanMakeItHold(t *testing.T) {
	p := &Proxy{}
	p.roots.system = x509.NewCertPool()
	ps := &pools{}
	defer ps.close()
	pol := policy.DenyAll()
	var made []*upstreamPool
	var peers []net.Conn
	for i := range poolMaxPools + 50 {
		fs := &flowState{flow: &netstack.Flow{Name: fmt.Sprintf("n%d.api.test", i), Port: 443}}
		up, err := ps.lookup(p, fs, pol)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, up)
		for range 3 { // three idle connections each: past the total bound
			a, b := net.Pipe()
			up.put(&h1Conn{tc: tls.Client(a, &tls.Config{})})
			peers = append(peers, b)
		}
	}
	if n := len(ps.m); n != poolMaxPools {
		t.Errorf("%d pools kept, want at most %d", n, poolMaxPools)
	}
	if !made[0].dead.Load() || made[len(made)-1].dead.Load() {
		t.Error("making a pool past the bound did not drop the least recently used one")
	}
	if n := ps.idleH1.Load(); n > poolMaxIdleH1Total {
		t.Errorf("%d idle HTTP/1.1 connections held, want at most %d", n, poolMaxIdleH1Total)
	}
	var open int64
	for _, b := range peers {
		if !closedPeer(b) {
			open++
		}
	}
	if open != ps.idleH1.Load() {
		t.Errorf("%d connections left open, but %d counted idle: a connection was neither kept nor closed", open, ps.idleH1.Load())
	}
}

// TestPoolBoundsUpstreamConnectionsOfOneGuestConnection: the streams of a
// guest's HTTP/2 connection to an upstream that speaks only HTTP/1.1 need a
// connection each; they get at most poolMaxConns, the rest wait for one —
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
	const streams = poolMaxConns + 36 // within the guest server's 250 concurrent streams
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
	for inFlight.Load() < poolMaxConns {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests reached the upstream in 10 s, want %d at once", inFlight.Load(), poolMaxConns)
		}
		select {
		case err := <-errs:
			t.Fatalf("a request ended before any was let through: %v", err)
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for any beyond the bound to arrive
	if n := tp.handshakes.Load(); n > poolMaxConns {
		t.Errorf("%d upstream connections for one guest connection, want at most %d", n, poolMaxConns)
	}
	if n := most.Load(); n != poolMaxConns {
		t.Errorf("%d requests at the upstream at once, want %d: the rest wait for a connection", n, poolMaxConns)
	}
	close(release)
	for range streams {
		if err := <-errs; err != nil {
			t.Errorf("a request: %v", err)
		}
	}
}
