package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
)

// TestPoolDroppedWhileBusyClosesItsConnections: a pool pushed out (the
// guest touched poolMaxPools other names) while a request of its runs
// closes that request's upstream connection once the request ends, rather
// than keeping it idle in a transport nobody uses for 90 s.
func TestPoolDroppedWhileBusyClosesItsConnections(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, "hello")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tr := New(func() (*x509.CertPool, error) { return roots, nil })
	defer tr.Close()
	pol := policy.DenyAll()
	nf := &netstack.Flow{Name: "example.com", Port: 443, Current: func() *policy.Policy { return pol },
		Redial: func(ctx context.Context, _ *policy.Policy) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
		}}
	f := tr.NewFlow(nf, GuestH2, nil, roots)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, _ := http.NewRequestWithContext(WithRequest(context.Background(), &Request{Policy: pol}), "GET", "https://example.com/slow", nil)
		resp, err := f.RoundTrip(r)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	<-started
	tr.pools.mu.Lock()
	up := tr.pools.m[poolKey{pol: pol, name: "example.com", port: 443}]
	tr.pools.mu.Unlock()
	for i := range poolMaxPools {
		time.Sleep(time.Microsecond) // distinct use times: example.com is the least recently used
		if _, err := tr.pools.lookup(&tr.roots, &netstack.Flow{Name: fmt.Sprintf("n%d.api.test", i), Port: 443}, pol); err != nil {
			t.Fatal(err)
		}
	}
	if up == nil || !up.dead.Load() {
		t.Fatal("example.com's pool was not pushed out")
	}
	close(release)
	<-done
	for deadline := time.Now().Add(5 * deadReapEvery); up.h1Open.Load()+up.h2Open.Load() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the dropped pool's transports still hold %d upstream connections open %v after its request ended; want none",
				up.h1Open.Load()+up.h2Open.Load(), 5*deadReapEvery)
		}
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
	rc := &rootsCache{system: func() (*x509.CertPool, error) { return x509.NewCertPool(), nil }}
	ps := &pools{}
	defer ps.close()
	pol := policy.DenyAll()
	var made []*upstreamPool
	var peers []net.Conn
	for i := range poolMaxPools + 50 {
		f := &netstack.Flow{Name: fmt.Sprintf("n%d.api.test", i), Port: 443}
		up, err := ps.lookup(rc, f, pol)
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

type recordingRT struct{ methods []string }

func (rt *recordingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.methods = append(rt.methods, r.Method)
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
}

// TestHTTP3ZeroRTTMethodsGoOverTCP: quic-go's HTTP/3 client sends the
// methods GET_0RTT and HEAD_0RTT as GET and HEAD, so a guest writing one
// had a request decided as GET_0RTT (past a GET rule) reach the upstream
// as GET. They go over TCP, as decided.
func TestHTTP3ZeroRTTMethodsGoOverTCP(t *testing.T) {
	tcp := &recordingRT{}
	u := &h3First{tcp: tcp} // no Flow: trying QUIC would panic
	for _, m := range []string{http3.MethodGet0RTT, http3.MethodHead0RTT} {
		r, _ := http.NewRequest(m, "https://api.test/admin", nil)
		if _, err := u.RoundTrip(r); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(tcp.methods, ",") != "GET_0RTT,HEAD_0RTT" {
		t.Errorf("over TCP went %v, want both methods as written", tcp.methods)
	}
}
