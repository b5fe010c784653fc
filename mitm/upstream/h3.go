package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/capsem/capsem/policy"
)

const (
	// quicIdle ends an upstream QUIC connection nothing moved on for this
	// long, as the MITM ends the guest's.
	quicIdle = 30 * time.Second
	// H3Probe bounds the QUIC handshake tried with an upstream before a
	// guest's HTTP/3 request goes over TCP instead: an upstream that speaks
	// QUIC answers within a round trip or two, and one that drops UDP would
	// otherwise cost the request the whole handshake timeout.
	H3Probe = 300 * time.Millisecond
	// h3Remember is how long an upstream's answer (QUIC or not) is kept,
	// so that only the first request in that time pays for a probe that
	// fails.
	h3Remember = 10 * time.Minute
	// h3CacheMax bounds the hosts remembered; past it the oldest answer is
	// forgotten.
	h3CacheMax = 4096
)

// h3Cache remembers per upstream host whether it answered QUIC.
type h3Cache struct {
	mu sync.Mutex
	m  map[string]h3Answer
}

type h3Answer struct {
	quic  bool
	until time.Time
}

// get reports what host answered last, if that is still remembered.
func (c *h3Cache) get(host string) (quic, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[host]
	if !ok || time.Now().After(a.until) {
		return false, false
	}
	return a.quic, true
}

func (c *h3Cache) put(host string, quic bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]h3Answer)
	}
	if _, ok := c.m[host]; !ok && len(c.m) >= h3CacheMax {
		var oldest string
		for h, a := range c.m {
			if oldest == "" || a.until.Before(c.m[oldest].until) {
				oldest = h
			}
		}
		delete(c.m, oldest)
	}
	c.m[host] = h3Answer{quic: quic, until: time.Now().Add(h3Remember)}
}

// h3First is the upstream of a guest's HTTP/3 flow: HTTP/3 when the
// upstream answers QUIC (a handshake tried for at most H3Probe, the answer
// remembered per host for h3Remember), else the flow's TCP transport
// (HTTP/2 or HTTP/1.1, as for any flow).
type h3First struct {
	f     *Flow
	roots *x509.CertPool
	tcp   http.RoundTripper

	mu     sync.Mutex
	cc     *http3.ClientConn // the upstream connection, while it lives
	conn   *quic.Conn        // under cc
	ccPol  *policy.Policy    // the policy cc was dialled under: it carries that policy's requests only
	closed bool
}

func (u *h3First) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http3.MethodGet0RTT || r.Method == http3.MethodHead0RTT {
		// quic-go's client sends these as GET and HEAD, where the policy
		// decided (and the record says) the method the guest wrote: over
		// TCP it goes upstream as it was decided.
		return u.tcp.RoundTrip(r)
	}
	if cc := u.clientConn(r.Context(), u.f.policyOf(r)); cc != nil {
		resp, err := cc.RoundTrip(r)
		if err != nil && cc.Context().Err() != nil {
			u.drop(cc) // the connection ended: the next request dials again
		}
		return resp, err
	}
	return u.tcp.RoundTrip(r)
}

// clientConn returns the flow's HTTP/3 connection to the upstream for a
// request decided under pol, dialling it if the upstream is not known to
// refuse QUIC; nil: use TCP (the pool of pol). A request decided under
// another policy than the connection's — a reload during the flow — goes
// over TCP, as a connection never carries two policies' requests.
func (u *h3First) clientConn(ctx context.Context, pol *policy.Policy) *http3.ClientConn {
	host := u.f.flow.Name
	if pol.ProxyFor(host) != nil {
		return nil // through an HTTP proxy: TCP only
	}
	quicOK, known := u.f.t.h3.get(host)
	if known && !quicOK {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil
	}
	if u.cc != nil && u.conn.Context().Err() == nil {
		if u.ccPol != pol {
			return nil
		}
		return u.cc
	}
	// None yet, or the upstream ended the last one (its idle timeout):
	// a request on it would fail without reaching the upstream.
	u.cc, u.conn = nil, nil
	timeout := H3Probe
	if quicOK {
		timeout = HandshakeTimeout // it answered before: give it the time a handshake may need
	}
	conn, answered, err := u.dial(ctx, pol, timeout)
	if err != nil {
		if answered {
			u.f.t.h3.put(host, false)
		}
		return nil
	}
	u.f.t.h3.put(host, true)
	u.conn, u.cc, u.ccPol = conn, (&http3.Transport{}).NewClientConn(conn), pol
	return u.cc
}

// dial tries a QUIC handshake with the upstream's addresses in turn within
// timeout. answered is false when the failure says nothing of the
// upstream (the policy no longer allows it, its name did not resolve, no
// UDP socket): only an upstream that was tried and did not complete a
// handshake is remembered as not speaking QUIC. The handshake does not
// follow the request's cancellation: a guest that gives up on its request
// must not have the host remembered as not speaking QUIC.
func (u *h3First) dial(ctx context.Context, pol *policy.Policy, timeout time.Duration) (conn *quic.Conn, answered bool, err error) {
	if u.f.flow.Upstream == nil {
		return nil, false, errors.New("the flow has no upstream addresses")
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	addrs, err := u.f.flow.Upstream(dctx, pol)
	if err != nil || len(addrs) == 0 {
		return nil, false, errors.Join(err, errors.New("no upstream address"))
	}
	tr, err := u.f.t.quicTransport()
	if err != nil {
		return nil, false, err
	}
	tlsConf := &tls.Config{
		ServerName: u.f.flow.Name,
		RootCAs:    u.roots,
		NextProtos: []string{http3.NextProtoH3},
		MinVersion: tls.VersionTLS13,
	}
	for _, a := range addrs {
		conn, err = tr.Dial(dctx, net.UDPAddrFromAddrPort(a), tlsConf, &quic.Config{HandshakeIdleTimeout: timeout, MaxIdleTimeout: quicIdle})
		if err == nil || dctx.Err() != nil {
			break
		}
	}
	return conn, true, err
}

func (u *h3First) drop(cc *http3.ClientConn) {
	u.mu.Lock()
	if u.cc == cc {
		u.cc, u.conn = nil, nil
	}
	u.mu.Unlock()
}

// close ends the upstream QUIC connection with the flow.
func (u *h3First) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.conn != nil {
		u.conn.CloseWithError(0, "")
	}
}

// quicTransport is the one UDP socket for upstream QUIC, which every
// flow's upstream connection shares (quic-go demultiplexes by connection
// ID), created on first use and closed with the Transports.
func (t *Transports) quicTransport() (*quic.Transport, error) {
	t.quicMu.Lock()
	defer t.quicMu.Unlock()
	if t.quicUp == nil {
		udp, err := net.ListenUDP("udp", nil)
		if err != nil {
			return nil, fmt.Errorf("upstream: a UDP socket for upstream QUIC: %w", err)
		}
		t.quicUp = &quic.Transport{Conn: udp}
	}
	return t.quicUp, nil
}
