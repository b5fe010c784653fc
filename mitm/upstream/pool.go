package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
)

// Upstream connections are pooled across guest connections: a guest that
// opens a connection per request (curl in a loop, a client that keeps
// nothing alive) would otherwise pay an upstream TCP connection and TLS
// handshake for each request, two round trips to a remote API before its
// request is even sent.
//
// A pool is keyed by the policy, the name and the port. The policy pointer
// stands for everything a dial depends on ([upstream] resolve targets,
// allow_private, the ca_files the upstream is verified against), and each
// request takes the pool of the policy that decided it (Request.Policy): a
// connection is only transport, and carries no request decided under
// another policy than the one it was opened under. A reload makes new
// pools; the old ones empty as their connections idle out.
const (
	// poolIdleTimeout is how long a connection may wait in a pool for its
	// next request; a pool unused for as long is dropped.
	poolIdleTimeout = 90 * time.Second
	// poolMaxIdleH1 bounds a pool's idle HTTP/1.1 connections: as many as
	// the guest had requests in flight at once, up to this many, wait for
	// the next ones (the oldest is closed first).
	poolMaxIdleH1 = 64
	// poolMaxIdleTransport bounds the idle connections of each of a pool's
	// http.Transports (HTTP/2 carries many streams on one).
	poolMaxIdleTransport = 4
	// The guest chooses the names it connects to (any under an allowed
	// wildcard), and each name has a pool whose connections outlive the
	// guest's: without these bounds a guest opening connections to new
	// names would make capsem hold an upstream connection, and a file
	// descriptor, per name for poolIdleTimeout. With them capsem holds at
	// most poolMaxIdleH1Total idle HTTP/1.1 connections, and
	// poolMaxPools × 2 × poolMaxIdleTransport idle ones in the transports;
	// making a pool beyond poolMaxPools drops the least recently used.
	poolMaxIdleH1Total = 256
	poolMaxPools       = 128
	// MaxConns bounds the connections of a pool's transport for the
	// guest's HTTP/2 and HTTP/3 requests, busy or idle; requests beyond it
	// wait for one. Those guest connections carry up to 250 streams each,
	// and to an upstream that speaks only HTTP/1.1 every stream in flight
	// took a connection of its own: without the bound a guest within
	// MaxFlows could make capsem open 250 upstream connections per flow.
	// The guest's HTTP/1.1 requests take one connection at a time per
	// guest connection (h1Upstream; its transport carries upgrades, which
	// hold theirs for as long as the WebSocket lives, and is not bounded).
	MaxConns = 64
)

type poolKey struct {
	pol  *policy.Policy
	name string
	port uint16
}

// upstreamPool is the connections to one upstream under one policy.
type upstreamPool struct {
	key    poolKey
	pools  *pools
	redial func(context.Context, *policy.Policy) (net.Conn, error) // the first flow's Flow.Redial, called with key.pol: the same name, port and stack for all
	tlsH1  *tls.Config                                             // the HTTP/1.1 path's connections
	h1t    *http.Transport                                         // HTTP/1.1 only: what the HTTP/1.1 path does not handle itself
	h2t    *http.Transport                                         // HTTP/2 when the upstream speaks it: HTTP/2 and HTTP/3 guests
	h2Open atomic.Int64                                            // connections h2t holds open
	h1Open atomic.Int64                                            // connections h1t holds open

	mu    sync.Mutex
	idle  []*h1Conn // most recently used last
	used  time.Time // the last take, put or request through a transport
	sweep *time.Timer
	dead  atomic.Bool // dropped from pools: what is put back is closed; set under mu
}

// pools is the Transports' pools.
type pools struct {
	mu     sync.Mutex
	m      map[poolKey]*upstreamPool
	closed bool
	idleH1 atomic.Int64 // idle HTTP/1.1 connections in all pools
}

// get returns the pool for requests of f decided under pol, making it.
// last is the pool the flow's previous request took: the same one while
// the policy stands and the pool lives, found without the map's lock.
func (ps *pools) get(roots *rootsCache, f *netstack.Flow, pol *policy.Policy, last *atomic.Pointer[upstreamPool]) (*upstreamPool, error) {
	if up := last.Load(); up != nil && up.key.pol == pol && !up.dead.Load() {
		return up, nil
	}
	up, err := ps.lookup(roots, f, pol)
	if err == nil {
		last.Store(up)
	}
	return up, err
}

func (ps *pools) lookup(rc *rootsCache, f *netstack.Flow, pol *policy.Policy) (*upstreamPool, error) {
	key := poolKey{pol: pol, name: f.Name, port: f.Port}
	ps.mu.Lock()
	if up := ps.m[key]; up != nil {
		ps.mu.Unlock()
		return up, nil
	}
	ps.mu.Unlock()
	roots, err := rc.get(pol)
	if err != nil {
		return nil, err
	}
	up := newUpstreamPool(ps, key, roots, f.Redial)
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		return nil, errors.New("the MITM is shutting down")
	}
	if have := ps.m[key]; have != nil {
		ps.mu.Unlock()
		return have, nil
	}
	if ps.m == nil {
		ps.m = make(map[poolKey]*upstreamPool)
	}
	var evicted *upstreamPool
	if len(ps.m) >= poolMaxPools {
		evicted = ps.leastRecentLocked()
		delete(ps.m, evicted.key)
	}
	ps.m[key] = up
	ps.mu.Unlock()
	if evicted != nil {
		evicted.drop()
	}
	return up, nil
}

// leastRecentLocked is the pool used longest ago. ps.mu must be held.
func (ps *pools) leastRecentLocked() *upstreamPool {
	var lru *upstreamPool
	var oldest time.Time
	for _, up := range ps.m {
		up.mu.Lock()
		used := up.used
		up.mu.Unlock()
		if lru == nil || used.Before(oldest) {
			lru, oldest = up, used
		}
	}
	return lru
}

// has says whether a pool holds a live connection to name:port opened
// under pol.
func (ps *pools) has(pol *policy.Policy, name string, port uint16) bool {
	ps.mu.Lock()
	up := ps.m[poolKey{pol: pol, name: name, port: port}]
	ps.mu.Unlock()
	if up == nil {
		return false
	}
	if up.h2Open.Load() > 0 {
		return true
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	return len(up.idle) > 0
}

// close closes every pool's idle connections; connections in use are
// closed when their requests end.
func (ps *pools) close() {
	ps.mu.Lock()
	ps.closed = true
	m := ps.m
	ps.m = nil
	ps.mu.Unlock()
	for _, up := range m {
		up.drop()
	}
}

func newUpstreamPool(ps *pools, key poolKey, roots *x509.CertPool, redial func(context.Context, *policy.Policy) (net.Conn, error)) *upstreamPool {
	up := &upstreamPool{key: key, pools: ps, redial: redial, used: time.Now(),
		tlsH1: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, ServerName: key.name, NextProtos: []string{"http/1.1"}},
	}
	up.h1t = up.transport(roots, false)
	up.h2t = up.transport(roots, true)
	return up
}

// transport is an http.Transport over the pool's dials: HTTP/2 when h2
// and the upstream speaks it, HTTP/1.1 otherwise.
func (up *upstreamPool) transport(roots *x509.CertPool, h2 bool) *http.Transport {
	t := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := up.dial(ctx)
			if err != nil {
				return nil, err
			}
			open := &up.h1Open
			if h2 {
				open = &up.h2Open
			}
			open.Add(1)
			return &countedConn{Conn: c, open: open}, nil
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DisableCompression:    true,
		MaxIdleConns:          poolMaxIdleTransport,
		MaxIdleConnsPerHost:   poolMaxIdleTransport,
		IdleConnTimeout:       poolIdleTimeout,
		TLSHandshakeTimeout:   HandshakeTimeout,
		ExpectContinueTimeout: time.Second,
	}
	if h2 {
		t.ForceAttemptHTTP2 = true
		t.MaxConnsPerHost = MaxConns
	} else {
		t.TLSClientConfig.NextProtos = []string{"http/1.1"}
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no HTTP/2
	}
	return t
}

// dial opens a TCP connection to the upstream: the one the stack dialled
// for the flow of the request, when unused and dialled under the pool's
// policy, else a new one.
func (up *upstreamPool) dial(ctx context.Context) (net.Conn, error) {
	if req := requestOf(ctx); req != nil && req.flow != nil {
		if c := req.flow.takePreDialed(up.key.pol); c != nil {
			return c, nil
		}
	}
	return up.redial(ctx, up.key.pol)
}

// take returns an idle HTTP/1.1 connection that is still open, or nil.
func (up *upstreamPool) take() *h1Conn {
	up.mu.Lock()
	defer up.mu.Unlock()
	up.used = time.Now()
	for len(up.idle) > 0 {
		c := up.idle[len(up.idle)-1]
		up.idle = up.idle[:len(up.idle)-1]
		up.pools.idleH1.Add(-1)
		if up.used.Sub(c.idleSince) < poolIdleTimeout && c.alive() {
			return c
		}
		c.close()
	}
	return nil
}

// put gives back a connection whose last response was read to the end.
func (up *upstreamPool) put(c *h1Conn) {
	up.mu.Lock()
	defer up.mu.Unlock()
	up.used = time.Now()
	if up.dead.Load() || len(up.idle) < poolMaxIdleH1 && up.pools.idleH1.Load() >= poolMaxIdleH1Total {
		c.close()
		return
	}
	c.idleSince = up.used
	if len(up.idle) == poolMaxIdleH1 {
		up.idle[0].close()
		up.idle = append(up.idle[:0], up.idle[1:]...)
	} else {
		up.pools.idleH1.Add(1)
	}
	up.idle = append(up.idle, c)
	if up.sweep == nil {
		up.sweep = time.AfterFunc(poolIdleTimeout, up.expire)
	}
}

// touch marks the pool used by a request through one of its transports.
func (up *upstreamPool) touch() {
	up.mu.Lock()
	up.used = time.Now()
	if up.sweep == nil && !up.dead.Load() {
		up.sweep = time.AfterFunc(poolIdleTimeout, up.expire)
	}
	up.mu.Unlock()
}

// expire closes the connections that idled out, and drops the pool once
// it has been unused for poolIdleTimeout.
func (up *upstreamPool) expire() {
	up.mu.Lock()
	if up.dead.Load() { // dropped while this call waited for the lock
		up.mu.Unlock()
		return
	}
	now := time.Now()
	keep := up.idle[:0]
	for _, c := range up.idle {
		if now.Sub(c.idleSince) >= poolIdleTimeout {
			c.close()
		} else {
			keep = append(keep, c)
		}
	}
	up.pools.idleH1.Add(-int64(len(up.idle) - len(keep)))
	clear(up.idle[len(keep):])
	up.idle = keep
	unused := now.Sub(up.used) >= poolIdleTimeout && len(up.idle) == 0
	if unused {
		up.sweep = nil
	} else {
		next := poolIdleTimeout - now.Sub(up.used)
		if len(up.idle) > 0 {
			next = poolIdleTimeout - now.Sub(up.idle[0].idleSince)
		}
		up.sweep.Reset(max(next, time.Second))
	}
	up.mu.Unlock()
	if unused {
		up.pools.mu.Lock()
		if up.pools.m[up.key] == up {
			delete(up.pools.m, up.key)
		}
		up.pools.mu.Unlock()
		up.drop()
	}
}

// drop closes the pool: its idle connections now, those in use when given
// back.
func (up *upstreamPool) drop() {
	up.mu.Lock()
	up.dead.Store(true)
	for _, c := range up.idle {
		c.close()
	}
	up.pools.idleH1.Add(-int64(len(up.idle)))
	up.idle = nil
	if up.sweep != nil {
		up.sweep.Stop()
		up.sweep = nil
	}
	up.mu.Unlock()
	up.reap()
}

// deadReapEvery is how often a dropped pool closes what its transports
// hold idle, while they hold connections open. A connection in use when
// the pool was dropped goes back to its transport's idle list when its
// request ends, where nothing else would close it for IdleConnTimeout (90
// s): a guest that kept requests in flight and pushed their pools out (new
// names under a wildcard) could hold sockets without bound.
const deadReapEvery = time.Second

// reap closes the transports' idle connections, and again every
// deadReapEvery until none is open.
func (up *upstreamPool) reap() {
	up.h1t.CloseIdleConnections()
	up.h2t.CloseIdleConnections()
	if up.h1Open.Load()+up.h2Open.Load() > 0 {
		time.AfterFunc(deadReapEvery, up.reap)
	}
}

// countedConn counts itself out of open when closed.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// pooledTransport forwards a flow's requests over the pool's http.Transport
// of the request's policy: HTTP/2 when the upstream speaks it (the
// concurrent streams of every guest connection to the upstream share its
// connections), for HTTP/2 and HTTP/3 guests.
type pooledTransport struct {
	f    *Flow
	last atomic.Pointer[upstreamPool]
}

func (t *pooledTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pol := t.f.policyOf(r)
	up, err := t.f.t.pools.get(&t.f.t.roots, t.f.flow, pol, &t.last)
	if err != nil {
		return nil, err
	}
	up.touch()
	return up.h2t.RoundTrip(r)
}
