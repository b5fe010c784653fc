package upstream

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// HandshakeTimeout bounds an upstream's TLS or QUIC handshake, as the
// MITM bounds the guest's.
const HandshakeTimeout = 15 * time.Second

// Transports is the upstream side of one MITM: the roots, the pools, what
// upstreams answered QUIC, and the one UDP socket of upstream QUIC.
type Transports struct {
	roots  rootsCache
	pools  pools
	h3     h3Cache
	quicMu sync.Mutex
	quicUp *quic.Transport // upstream QUIC of every flow, on one UDP socket (nil until used)
}

// New returns the transports; system's pool verifies upstreams together
// with a policy's [upstream] ca_files. system is called once, when the
// first upstream needs it: loading the host's roots takes 40-50 ms (145
// certificates, the bundle and /etc/ssl/certs both parsed), which a VM's
// start need not wait for. Its error fails every upstream TLS connection.
func New(system func() (*x509.CertPool, error)) *Transports {
	t := &Transports{}
	t.roots.system = sync.OnceValues(system)
	return t
}

// Roots is the pool upstream servers are verified against under pol: the
// system roots and the policy's [upstream] ca_files.
func (t *Transports) Roots(pol *policy.Policy) (*x509.CertPool, error) { return t.roots.get(pol) }

// Pooled reports whether a pool holds an open connection to name:port
// made under pol.
func (t *Transports) Pooled(pol *policy.Policy, name string, port uint16) bool {
	return t.pools.has(pol, name, port)
}

// Close closes the pools' idle connections (those in use when their
// requests end) and the upstream QUIC socket.
func (t *Transports) Close() {
	t.pools.close()
	t.quicMu.Lock()
	if t.quicUp != nil {
		t.quicUp.Close()
		t.quicUp.Conn.Close()
	}
	t.quicMu.Unlock()
}

// Guest is the protocol of a guest connection, which decides how its
// requests go upstream.
type Guest uint8

const (
	// GuestH1: over the pool's HTTP/1.1 connections, one at a time.
	GuestH1 Guest = iota
	// GuestH2: over the pool's HTTP/2 transport when the upstream speaks
	// it (the streams of every guest connection share its connections).
	GuestH2
	// GuestH3: over HTTP/3 when the upstream answers QUIC, else as GuestH2.
	GuestH3
)

// Flow is the upstream side of one guest connection: its requests'
// transport, and the connection the stack dialled for it.
type Flow struct {
	t    *Transports
	flow *netstack.Flow
	rt   http.RoundTripper
	h3   *h3First // nil unless the guest speaks HTTP/3
	// preDialed is the upstream connection the stack dialled for the flow
	// under dialPol (Flow.Dialed: the policy at the guest's SYN, which a
	// reload may have replaced by the ClientHello), until a request of the
	// flow decided under that same policy takes it (nil when the stack
	// dialled none: a pool had a connection).
	preDialed atomic.Pointer[net.Conn]
	dialPol   *policy.Policy
}

// NewFlow returns the upstream side of a guest connection of protocol
// guest on f; preDialed is the connection the stack dialled for it (nil:
// none), roots verify an HTTP/3 upstream (the pools take their policy's).
// A local flow (the MCP gateway's) is never dialled: its requests have no
// HTTP/3 upstream to try.
func (t *Transports) NewFlow(f *netstack.Flow, guest Guest, preDialed net.Conn, roots *x509.CertPool) *Flow {
	u := &Flow{t: t, flow: f, dialPol: f.Dialed}
	if preDialed != nil {
		u.preDialed.Store(&preDialed)
	}
	switch {
	case guest == GuestH1:
		u.rt = &h1Upstream{f: u}
	case guest == GuestH3 && !f.Local:
		u.rt = &pooledTransport{f: u}
		u.h3 = &h3First{f: u, roots: roots, tcp: u.rt}
		u.rt = u.h3
	default:
		u.rt = &pooledTransport{f: u}
	}
	return u
}

// RoundTrip forwards r upstream: http.RoundTripper.
func (u *Flow) RoundTrip(r *http.Request) (*http.Response, error) { return u.rt.RoundTrip(r) }

// Close ends the flow's upstream QUIC connection and closes the
// connection the stack dialled for it, if no request took it.
func (u *Flow) Close() {
	if u.h3 != nil {
		u.h3.close()
	}
	if c := u.preDialed.Swap(nil); c != nil {
		(*c).Close()
	}
}

// takePreDialed returns the connection the stack dialled for the flow, once,
// if it was dialled under pol.
func (u *Flow) takePreDialed(pol *policy.Policy) net.Conn {
	if u.dialPol != pol || u.preDialed.Load() == nil {
		return nil
	}
	if c := u.preDialed.Swap(nil); c != nil {
		return *c
	}
	return nil
}

// Request is what the transports know of a request beyond it, under this
// package's context key, and what they tell back.
type Request struct {
	// Policy is the policy that decided the request: it takes that
	// policy's pool, so a connection never carries a request decided
	// under another policy than the one it was opened under.
	Policy *policy.Policy
	// Wire is the response head's fields in wire order, when the HTTP/1.1
	// path read the head itself; nil otherwise.
	Wire []store.Header
	// Owner is the caller's own, carried for it under the same key (one
	// context value per request, not two); the transports never read it.
	Owner any
	// flow is the flow whose transport took the request: a new
	// connection may be its pre-dialed one.
	flow *Flow
}

type requestKey struct{}

// WithRequest returns ctx carrying req for the transports.
func WithRequest(ctx context.Context, req *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

// RequestOf returns the Request ctx carries, or nil.
func RequestOf(ctx context.Context) *Request { return requestOf(ctx) }

func requestOf(ctx context.Context) *Request {
	req, _ := ctx.Value(requestKey{}).(*Request)
	return req
}

// policyOf is the policy that decided r (WithRequest), or the flow's
// policy in force now for a request that carries none; it marks the
// request as u's, so that a connection dialled for it may be u's
// pre-dialed one.
func (u *Flow) policyOf(r *http.Request) *policy.Policy {
	if req := requestOf(r.Context()); req != nil {
		req.flow = u
		if req.Policy != nil {
			return req.Policy
		}
	}
	return u.flow.Current()
}

// SwitchRefused is the error that keeps an upstream's 101 from becoming a
// tunnel.
type SwitchRefused struct{ Why string }

func (e *SwitchRefused) Error() string {
	return "the upstream answered 101 Switching Protocols and capsem refused it: " + e.Why
}

// UnaskedSwitch is the refusal of a 101 to a request that asked for no
// protocol switch capsem allows.
func UnaskedSwitch(h http.Header) error {
	up := strings.Join(h["Upgrade"], ", ")
	if up == "" {
		up = "(none)"
	}
	return &SwitchRefused{fmt.Sprintf("the request asked for no protocol switch capsem allows (Upgrade in the answer: %s)", up)}
}

// AnsweredQUIC reports what host answered when the transports last tried
// QUIC with it, if that is still remembered.
func (t *Transports) AnsweredQUIC(host string) (quic, known bool) { return t.h3.get(host) }
