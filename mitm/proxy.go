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

	"github.com/capsem/capsem/ask"

	"golang.org/x/net/http2"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/internal/tlshello"
	"github.com/capsem/capsem/mitm/upstream"
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
	// Asks is asked about the MCP tools the policy leaves to a person
	// ([mcp] unknown = "ask"); the request waits, its body held, for the
	// answer. Nil: nobody is asked, and such calls are refused at once.
	Asks *ask.Broker
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
	up         *upstream.Transports // the upstream connections, shared by the flows to each upstream
	h2         *http2.Server        // the guest's HTTP/2 (serveH2)

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
	system := func() (*x509.CertPool, error) { return cfg.SystemRoots, nil }
	if cfg.SystemRoots == nil {
		system = func() (*x509.CertPool, error) {
			pool, err := x509.SystemCertPool()
			if err != nil {
				return nil, fmt.Errorf("mitm: the host's system roots: %w", err)
			}
			return pool, nil
		}
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
	p.up = upstream.New(system)
	if cfg.SystemRoots == nil {
		// Loaded meanwhile, off the VM's start, for the first upstream.
		go p.up.Roots(nil)
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: time.Minute,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			switch c := c.(type) {
			case *h1HeadsConn:
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
	// on the plain h1HeadsConn.
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
	p.up.Close()
	for _, in := range p.inspectors {
		if c, ok := in.(io.Closer); ok {
			c.Close() // an inspector records what it still holds
		}
	}
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
	forward *upstream.Flow // what the reverse proxy forwards with
	h1heads *h1Heads       // the request heads of a guest HTTP/1.1 connection, in wire order
	h2heads *h2Heads       // those of a guest HTTP/2 connection
	hello   *tlshello.Hello
	scan    atomic.Pointer[flowScan] // what this flow's requests are checked for (secrets.go)
	active  sync.WaitGroup           // requests being served
	held    holdBudget               // the bytes of its requests' held bodies (limits.go)
}

type flowKey struct{}

func (p *Proxy) intercept(ctx context.Context, guest, up net.Conn, f *netstack.Flow, hello *tlshello.Hello, raw []byte, pol *policy.Policy) netstack.FlowResult {
	res := netstack.FlowResult{ConnType: store.ConnHTTPS}
	roots, err := p.up.Roots(pol) // the pools need them: fail the flow now
	if err != nil {
		if up != nil {
			up.Close()
		}
		res.Err = err
		return res
	}
	fs := &flowState{flow: f, sni: hello.ServerName, hello: hello, held: holdBudget{max: maxHeldPerFlow}}
	defer func() {
		fs.active.Wait() // HTTP/2 handlers may outlive the connection briefly
		if fs.forward != nil {
			fs.forward.Close()
		} else if up != nil {
			up.Close()
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
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		res.BytesSent, res.BytesReceived = gc.read.Load(), gc.written.Load()
		res.Err = fmt.Errorf("TLS handshake with the guest (does it trust the capsem CA?): %w", err)
		return res
	}
	guestH2 := tc.ConnectionState().NegotiatedProtocol == "h2"
	guestProto := upstream.GuestH1
	if guestH2 {
		guestProto = upstream.GuestH2
	}
	p.serveFlow(fs, guestProto, up, roots)
	var served net.Conn = tc
	if guestH2 {
		fs.h2heads = newH2Heads() // serveH2 puts it in front of the HTTP/2 server
	} else {
		fs.h1heads = &h1Heads{}
		served = &h1HeadsConn{Conn: tc, fs: fs, heads: fs.h1heads}
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

// serveFlow gives an intercepted flow its upstream transport and its
// reverse proxy, for a guest speaking guest: the one setup of TLS and
// QUIC flows alike. preDialed is the connection the stack dialled for it
// (nil: none); roots verify an HTTP/3 upstream.
func (p *Proxy) serveFlow(fs *flowState, guest upstream.Guest, preDialed net.Conn, roots *x509.CertPool) {
	fs.forward = p.up.NewFlow(fs.flow, guest, preDialed, roots)
	fs.proxy = p.reverseProxy(fs)
}

// Pooled is a netstack.Config.Pooled: whether a pool holds an open
// connection to name:port made under pol, for a port the MITM intercepts.
// The stack then dials nothing for the guest's new connection.
func (p *Proxy) Pooled(pol *policy.Policy, name string, port uint16) bool {
	return p.intercepts(port) && p.up.Pooled(pol, name, port)
}

// UpstreamRoots is the pool upstream servers are verified against under
// pol: the system roots and the policy's [upstream] ca_files. The MCP
// gateway verifies remote servers with it, like any upstream.
func (p *Proxy) UpstreamRoots(pol *policy.Policy) (*x509.CertPool, error) { return p.up.Roots(pol) }

var _ io.Closer = (*Proxy)(nil)
