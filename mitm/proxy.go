package mitm

import (
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
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/mitm/provider"
	"github.com/capsem/capsem/mitm/tlshello"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// Reasons a flow or request is refused, as recorded in events.
const (
	ReasonBadHello    = "tls-bad-client-hello"
	ReasonNoSNI       = "tls-no-sni"
	ReasonSNIMismatch = "tls-sni-mismatch"
	ReasonHostNotSNI  = "http-host-not-sni"
	ReasonHTTPDenied  = "http-denied"
	ReasonUpstreamTLS = "upstream-error"
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
}

// Proxy terminates and forwards intercepted flows. Its HandleFlow is a
// netstack.FlowHandler.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	srv    *http.Server
	ln     *connListener
	tracer *provider.Tracer
	roots  rootsCache

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
	p := &Proxy{
		cfg:       cfg,
		log:       cfg.Logger,
		ln:        newConnListener(),
		tracer:    provider.NewTracer(4096),
		serveDone: make(chan struct{}),
	}
	p.roots.system = cfg.SystemRoots
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: time.Minute,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				if gc, ok := tc.NetConn().(*guestConn); ok {
					return context.WithValue(ctx, flowKey{}, gc.flow)
				}
			}
			return ctx
		},
	}
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
	if !p.intercepts(f.Port) {
		return netstack.Splice(ctx, guest, upstream, f)
	}
	res := netstack.FlowResult{ConnType: store.ConnTLS}
	guest.SetReadDeadline(time.Now().Add(HelloTimeout))
	hello, raw, err := tlshello.Read(guest)
	guest.SetReadDeadline(time.Time{})
	res.BytesSent = int64(len(raw))
	switch {
	case err != nil:
		upstream.Close()
		res.Refused, res.Err = ReasonBadHello, fmt.Errorf("no TLS ClientHello from the guest on port %d: %w", f.Port, err)
		return res
	case hello.ServerName == "":
		upstream.Close()
		res.Refused, res.Err = ReasonNoSNI, errors.New("the ClientHello names no server (SNI); capsem needs it to check the name the guest resolved")
		return res
	case hello.ServerName != strings.ToLower(f.Name):
		upstream.Close()
		res.Refused, res.Err = ReasonSNIMismatch, fmt.Errorf("the ClientHello names %q but the guest connected to the address of %q", hello.ServerName, f.Name)
		return res
	}
	pol := f.Current()
	if rule, ok := pol.Passthrough(hello.ServerName); ok {
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
	flow      *netstack.Flow
	sni       string
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	preDialed atomic.Pointer[net.Conn]
	hello     *tlshello.Hello
	active    sync.WaitGroup // requests being served
}

type flowKey struct{}

func (p *Proxy) intercept(ctx context.Context, guest, upstream net.Conn, f *netstack.Flow, hello *tlshello.Hello, raw []byte, pol *policy.Policy) netstack.FlowResult {
	res := netstack.FlowResult{ConnType: store.ConnHTTPS}
	roots, err := p.roots.get(pol)
	if err != nil {
		upstream.Close()
		res.Err = err
		return res
	}
	fs := &flowState{flow: f, sni: hello.ServerName, hello: hello}
	fs.preDialed.Store(&upstream)
	fs.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if c := fs.preDialed.Swap(nil); c != nil {
				return *c, nil
			}
			return f.Redial(ctx)
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   HelloTimeout,
		ExpectContinueTimeout: time.Second,
	}
	fs.proxy = p.reverseProxy(fs)
	defer func() {
		fs.active.Wait() // HTTP/2 handlers may outlive the connection briefly
		fs.transport.CloseIdleConnections()
		if c := fs.preDialed.Swap(nil); c != nil {
			(*c).Close()
		}
	}()

	gc := &guestConn{Conn: guest, replay: raw, flow: fs, closed: make(chan struct{})}
	tc := tls.Server(gc, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.cfg.CA.Leaf(fs.sni)
		},
	})
	hctx, cancel := context.WithTimeout(ctx, HelloTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		res.BytesSent, res.BytesReceived = gc.read.Load(), gc.written.Load()
		res.Err = fmt.Errorf("TLS handshake with the guest (does it trust the capsem CA?): %w", err)
		return res
	}
	if !p.ln.push(tc) {
		res.Err = errors.New("the MITM is shutting down")
		return res
	}
	select {
	case <-gc.closed:
	case <-ctx.Done():
		tc.Close()
		<-gc.closed
	}
	res.BytesSent, res.BytesReceived = gc.read.Load(), gc.written.Load()
	return res
}

// guestConn is the guest side of an intercepted flow under TLS: it replays
// the ClientHello already read, counts bytes, and tells when the HTTP
// server (or a hijacker) is done with it.
type guestConn struct {
	net.Conn
	replay        []byte
	flow          *flowState
	read, written atomic.Int64
	closeOnce     sync.Once
	closed        chan struct{}
}

func (c *guestConn) Read(b []byte) (int, error) {
	if len(c.replay) > 0 {
		n := copy(b, c.replay)
		c.replay = c.replay[n:]
		c.read.Add(int64(n))
		return n, nil
	}
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c *guestConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

func (c *guestConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { close(c.closed) })
	return err
}

// connListener hands intercepted connections to the shared HTTP server.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{} }

// rootsCache builds the upstream verification pool for a policy once.
type rootsCache struct {
	system *x509.CertPool
	mu     sync.Mutex
	key    string
	pool   *x509.CertPool
}

func (r *rootsCache) get(pol *policy.Policy) (*x509.CertPool, error) {
	files := pol.UpstreamCAFiles()
	if len(files) == 0 {
		return r.system, nil
	}
	key := strings.Join(files, "\x00")
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key == key && r.pool != nil {
		return r.pool, nil
	}
	pool := r.system.Clone()
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("[upstream] ca_files: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("[upstream] ca_files: %s holds no PEM certificate", f)
		}
	}
	r.key, r.pool = key, pool
	return pool, nil
}

var _ io.Closer = (*Proxy)(nil)
