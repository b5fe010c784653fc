package mitm

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/net/http2"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/internal/tlshello"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// HelloTimeout bounds how long the guest may take to send its ClientHello
// and finish the TLS handshake.
const HelloTimeout = 15 * time.Second

// Config configures a Proxy.
type Config struct {
	// CA mints the leaves the guest sees. Required.
	CA *ca.Authority
	// Recorder gets one event per request and per model call. Required.
	Recorder netstack.Recorder
	// Ports are intercepted; other ports are spliced. Nil means 443.
	Ports []uint16
	// SystemRoots verify upstream servers, together with the policy's
	// [upstream] ca_files. Nil means the host's system roots.
	SystemRoots *x509.CertPool
	// Logger for operational messages. Nil means slog.Default().
	Logger *slog.Logger
	// MCPGateway serves the flows to policy.MCPGatewayHost (gateway.go).
	// Nil: such flows are refused (local-service-unserved).
	MCPGateway MCPGateway
	// MaxHeldBodies bounds the request body bytes all flows together may
	// have held whole before forwarding (limits.go). Zero means
	// DefaultMaxHeldBodies.
	MaxHeldBodies int64
	// HeldBodyDeadline is how long a held body may take to arrive. Zero
	// means DefaultHeldBodyDeadline.
	HeldBodyDeadline time.Duration
}

// Proxy terminates and forwards intercepted flows. Its HandleFlow is a
// netstack.FlowHandler.
type Proxy struct {
	cfg Config
	log *slog.Logger
	srv *http.Server
	ln  *connListener
	// inspectors are the list every request goes through (inspectors.go).
	inspectors []inspect.Inspector
	h3         h3Cache // which upstreams answered QUIC (h3upstream.go)
	quicMu     sync.Mutex
	quicUp     *quic.Transport // upstream QUIC of every flow, on one UDP socket (nil until used)
	roots      rootsCache
	pools      pools         // upstream connections, shared by the flows to each upstream (pool.go)
	h2         *http2.Server // the guest's HTTP/2 (serveH2)

	held     holdBudget // the bytes of all held request bodies (limits.go)
	views    views      // the secrets per policy and host (secrets.go)
	scanners sync.Map   // DLP scanners by their detectors (guard.go)

	serveDone chan struct{}
}

// New starts a proxy. Close stops it.
func New(cfg Config) (*Proxy, error) {
	if cfg.CA == nil || cfg.Recorder == nil {
		return nil, errors.New("mitm: a CA and a recorder are required")
	}
	if cfg.Ports == nil {
		cfg.Ports = []uint16{443}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SystemRoots == nil {
		pool, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("mitm: system roots: %w", err)
		}
		cfg.SystemRoots = pool
	}
	cfg.HeldBodyDeadline = cmp.Or(cfg.HeldBodyDeadline, DefaultHeldBodyDeadline)
	p := &Proxy{
		cfg:       cfg,
		log:       cfg.Logger,
		ln:        newConnListener(),
		serveDone: make(chan struct{}),
	}
	p.held.max = cmp.Or(cfg.MaxHeldBodies, DefaultMaxHeldBodies)
	p.inspectors = newInspectors(cfg)
	p.roots.system = cfg.SystemRoots
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: time.Minute,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			switch c := c.(type) {
			case *tapConn:
				return context.WithValue(ctx, flowKey{}, c.fs)
			case *tls.Conn:
				if gc, ok := c.NetConn().(*guestConn); ok {
					return context.WithValue(ctx, flowKey{}, gc.flow)
				}
			}
			return ctx
		},
	}
	// HTTP/1.1, and HTTP/2 over TLS only: never h2c with prior knowledge
	// on the plain tapConn.
	p.srv.Protocols = new(http.Protocols)
	p.srv.Protocols.SetHTTP1(true)
	p.srv.Protocols.SetHTTP2(true)
	p.h2 = &http2.Server{MaxConcurrentStreams: maxGuestStreams}
	p.srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){"h2": p.serveH2}
	go func() {
		defer close(p.serveDone)
		p.srv.Serve(p.ln)
	}()
	return p, nil
}

// Close stops serving; flows in progress are cut.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	<-p.serveDone
	p.pools.close()
	for _, in := range p.inspectors {
		if c, ok := in.(io.Closer); ok {
			c.Close() // an inspector records what it still holds
		}
	}
	p.quicMu.Lock()
	if p.quicUp != nil {
		p.quicUp.Close()
		p.quicUp.Conn.Close()
	}
	p.quicMu.Unlock()
	return err
}

func (p *Proxy) intercepts(port uint16) bool {
	for _, q := range p.cfg.Ports {
		if q == port {
			return true
		}
	}
	return false
}

// HandleFlow is the netstack.FlowHandler: it intercepts flows to the
// configured ports and splices the rest.
func (p *Proxy) HandleFlow(ctx context.Context, guest, upstream net.Conn, f *netstack.Flow) netstack.FlowResult {
	if f.Local {
		if p.cfg.MCPGateway == nil || !p.intercepts(f.Port) {
			return netstack.FlowResult{ConnType: store.ConnTLS, Refused: ReasonLocalUnserved,
				Err: fmt.Errorf("%s:%d is served by capsem itself, and this MITM has no MCP gateway for it", f.Name, f.Port)}
		}
		upstream = noUpstream()
	}
	if upstream == nil && f.Pooled && !p.intercepts(f.Port) {
		// Pooled says yes for intercepted ports only; dial all the same.
		var err error
		if upstream, err = f.Redial(ctx, f.Current()); err != nil {
			return netstack.FlowResult{ConnType: store.ConnTCP, Err: err}
		}
	}
	if !p.intercepts(f.Port) {
		return netstack.Splice(ctx, guest, upstream, f)
	}
	// upstream is nil for a pooled flow (netstack.Config.Pooled): the
	// intercepted requests take the pool's connections.
	closeUp := func() {
		if upstream != nil {
			upstream.Close()
		}
	}
	res := netstack.FlowResult{ConnType: store.ConnTLS}
	guest.SetReadDeadline(time.Now().Add(HelloTimeout))
	hello, raw, err := tlshello.Read(guest)
	guest.SetReadDeadline(time.Time{})
	res.BytesSent = int64(len(raw))
	switch {
	case err != nil:
		closeUp()
		res.Refused, res.Err = ReasonBadHello, fmt.Errorf("no TLS ClientHello from the guest on port %d: %w", f.Port, err)
		return res
	case hello.ServerName == "":
		closeUp()
		res.Refused, res.Err = ReasonNoSNI, errors.New("the ClientHello names no server (SNI); capsem needs it to check the name the guest resolved")
		return res
	case hello.ServerName != strings.ToLower(f.Name):
		closeUp()
		res.Refused, res.Err = ReasonSNIMismatch, fmt.Errorf("the ClientHello names %q but the guest connected to the address of %q", hello.ServerName, f.Name)
		return res
	}
	pol := f.Current()
	if rule, ok := pol.Passthrough(hello.ServerName); ok {
		if upstream == nil {
			if upstream, err = f.Redial(ctx, pol); err != nil {
				res.Err = fmt.Errorf("passthrough (%s): %w", rule, err)
				return res
			}
		}
		if _, err := upstream.Write(raw); err != nil {
			upstream.Close()
			res.Err = fmt.Errorf("passthrough (%s): replaying the ClientHello upstream: %w", rule, err)
			return res
		}
		sp := netstack.Splice(ctx, guest, upstream, f)
		sp.BytesSent += res.BytesSent
		sp.ConnType = store.ConnTLS
		return sp
	}
	return p.intercept(ctx, guest, upstream, f, hello, raw, pol)
}

// flowState is one intercepted flow, shared by its requests.
type flowState struct {
	flow    *netstack.Flow
	sni     string
	proxy   *httputil.ReverseProxy
	forward http.RoundTripper // what the reverse proxy forwards with: an h1Upstream, a pooledTransport or an h3First (pool.go)
	tap     *h1Tap            // the request heads of a guest HTTP/1.1 connection, in wire order
	h2tap   *h2Tap            // those of a guest HTTP/2 connection
	// preDialed is the upstream connection the stack dialled for the flow
	// under dialPol (Flow.Dialed: the policy at the guest's SYN, which a
	// reload may have replaced by the ClientHello), until a request of the
	// flow decided under that same policy takes it (nil when the stack
	// dialled none: a pool had a connection).
	preDialed atomic.Pointer[net.Conn]
	dialPol   *policy.Policy
	hello     *tlshello.Hello
	scan      atomic.Pointer[flowScan] // what this flow's requests are checked for (secrets.go)
	active    sync.WaitGroup           // requests being served
	held      holdBudget               // the bytes of its requests' held bodies (limits.go)
}

type flowKey struct{}

func (p *Proxy) intercept(ctx context.Context, guest, upstream net.Conn, f *netstack.Flow, hello *tlshello.Hello, raw []byte, pol *policy.Policy) netstack.FlowResult {
	res := netstack.FlowResult{ConnType: store.ConnHTTPS}
	if _, err := p.roots.get(pol); err != nil { // the pools need them: fail the flow now
		if upstream != nil {
			upstream.Close()
		}
		res.Err = err
		return res
	}
	fs := &flowState{flow: f, sni: hello.ServerName, hello: hello, dialPol: f.Dialed, held: holdBudget{max: maxHeldPerFlow}}
	if upstream != nil {
		fs.preDialed.Store(&upstream)
	}
	defer func() {
		fs.active.Wait() // HTTP/2 handlers may outlive the connection briefly
		if c := fs.preDialed.Swap(nil); c != nil {
			(*c).Close()
		}
	}()

	gc := &guestConn{Conn: guest, replay: raw, flow: fs, closed: make(chan struct{})}
	tc := tls.Server(gc, guestKeyExchange(&tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.cfg.CA.Leaf(fs.sni)
		},
	}))
	hctx, cancel := context.WithTimeout(ctx, HelloTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		res.BytesSent, res.BytesReceived = gc.read.Load(), gc.written.Load()
		res.Err = fmt.Errorf("TLS handshake with the guest (does it trust the capsem CA?): %w", err)
		return res
	}
	guestH2 := tc.ConnectionState().NegotiatedProtocol == "h2"
	fs.forward = &pooledTransport{p: p, fs: fs}
	if !guestH2 {
		fs.forward = &h1Upstream{p: p, fs: fs}
	}
	fs.proxy = p.reverseProxy(fs)
	var served net.Conn = tc
	if guestH2 {
		fs.h2tap = newH2Tap() // serveH2 puts it in front of the HTTP/2 server
	} else {
		fs.tap = &h1Tap{}
		served = &tapConn{Conn: tc, fs: fs, tap: fs.tap}
	}
	if !p.ln.push(served) {
		res.Err = errors.New("the MITM is shutting down")
		return res
	}
	select {
	case <-gc.closed:
	case <-ctx.Done():
		// Not tc.Close: its close_notify write could block for good on a
		// guest that stopped reading (net/http clears the write deadline
		// crypto/tls sets for it), and Stack.Close waits for every flow.
		gc.Close()
		<-gc.closed
	}
	res.BytesSent, res.BytesReceived = gc.read.Load(), gc.written.Load()
	return res
}

var _ io.Closer = (*Proxy)(nil)
