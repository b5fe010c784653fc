package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/mitm/provider"
	"github.com/capsem/capsem/mitm/tlshello"
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
	h2     *http2.Server // the guest's HTTP/2 (serveH2)

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
	p.h2 = &http2.Server{}
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
	forward   http.RoundTripper // what the reverse proxy forwards with: transport, or h1 in front of it
	h1        *h1Upstream       // guest connections that speak HTTP/1.1
	tap       *h1Tap            // the request heads of a guest HTTP/1.1 connection, in wire order
	h2tap     *h2Tap            // those of a guest HTTP/2 connection
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
	defer func() {
		fs.active.Wait() // HTTP/2 handlers may outlive the connection briefly
		if fs.h1 != nil {
			fs.h1.closeIdle()
		}
		if fs.transport != nil {
			fs.transport.CloseIdleConnections()
		}
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
	guestH2 := tc.ConnectionState().NegotiatedProtocol == "h2"
	fs.transport = p.upstreamTransport(fs, roots, guestH2)
	fs.forward = fs.transport
	if !guestH2 {
		fs.h1 = newH1Upstream(fs, roots)
		fs.forward = fs.h1
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
		tc.Close()
		<-gc.closed
	}
	res.BytesSent, res.BytesReceived = gc.read.Load(), gc.written.Load()
	return res
}

// upstreamTransport is the flow's connection pool to its upstream. It
// speaks the protocol the guest chose: HTTP/2 when the guest negotiated h2
// (its concurrent streams share one upstream connection), HTTP/1.1
// otherwise, so that a guest's keep-alive connection maps onto one upstream
// keep-alive connection.
func (p *Proxy) upstreamTransport(fs *flowState, roots *x509.CertPool, h2 bool) *http.Transport {
	t := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if c := fs.preDialed.Swap(nil); c != nil {
				return *c, nil
			}
			return fs.flow.Redial(ctx)
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DisableCompression:    true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   HelloTimeout,
		ExpectContinueTimeout: time.Second,
	}
	if h2 {
		t.ForceAttemptHTTP2 = true
	} else {
		t.TLSClientConfig.NextProtos = []string{"http/1.1"}
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no HTTP/2
	}
	return t
}

// h1Upstream forwards the requests of one guest HTTP/1.1 connection over
// one upstream HTTP/1.1 keep-alive connection, in the handler's own
// goroutine: the request is written and the response read right there,
// where http.Transport would hand each request to a writer goroutine and
// each response over from a reader goroutine (four goroutine switches per
// request, about a tenth of the MITM's cost per small request).
//
// A guest's HTTP/1.1 requests come one at a time, so one connection is
// enough. What this path does not handle goes to fallback (the flow's
// http.Transport): upgrades (WebSocket), Expect: 100-continue, and a
// request that arrives while the connection is busy.
type h1Upstream struct {
	fs       *flowState
	tlsConf  *tls.Config
	fallback http.RoundTripper

	mu     sync.Mutex
	busy   bool
	idle   *h1Conn // the kept-alive connection, when not busy
	closed bool
}

type h1Conn struct {
	tc   *tls.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used bool // a response was read on it: a failure may mean the server closed it while idle
}

// close closes the TCP connection under TLS: it aborts blocked reads and
// writes at once, where tls.Conn.Close would first try to send an alert.
func (c *h1Conn) close() { c.tc.NetConn().Close() }

// alive says whether an idle connection can carry a request: the server
// has not closed it and has sent nothing unasked (a peek that would block).
func (c *h1Conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	sc, ok := c.tc.NetConn().(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	alive := true
	rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return alive
}

func newH1Upstream(fs *flowState, roots *x509.CertPool) *h1Upstream {
	return &h1Upstream{
		fs:       fs,
		fallback: fs.transport,
		tlsConf: &tls.Config{
			RootCAs:    roots,
			MinVersion: tls.VersionTLS12,
			ServerName: fs.flow.Name,
			NextProtos: []string{"http/1.1"},
		},
	}
}

func (u *h1Upstream) closeIdle() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.idle != nil {
		u.idle.close()
		u.idle = nil
	}
}

// release ends a request: c (nil when it was closed) becomes the idle
// connection.
func (u *h1Upstream) release(c *h1Conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.busy = false
	if c != nil && u.closed {
		c.close()
		c = nil
	}
	u.idle = c
}

func (u *h1Upstream) dial(ctx context.Context) (*h1Conn, error) {
	var raw net.Conn
	if c := u.fs.preDialed.Swap(nil); c != nil {
		raw = *c
	} else {
		var err error
		if raw, err = u.fs.flow.Redial(ctx); err != nil {
			return nil, err
		}
	}
	tc := tls.Client(raw, u.tlsConf)
	hctx, cancel := context.WithTimeout(ctx, HelloTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		raw.Close()
		return nil, err
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
		raw.Close()
		return nil, fmt.Errorf("the upstream chose %q when offered only http/1.1", p)
	}
	return &h1Conn{tc: tc, br: bufio.NewReaderSize(tc, 16<<10), bw: bufio.NewWriterSize(tc, 16<<10)}, nil
}

// replayable says whether a request may be sent again after a kept-alive
// connection turned out to be closed (as http.Transport decides it).
func replayable(r *http.Request) bool {
	if r.Body != nil && r.Body != http.NoBody {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := r.Header["Idempotency-Key"]
	_, xkey := r.Header["X-Idempotency-Key"]
	return key || xkey
}

func (u *h1Upstream) RoundTrip(r *http.Request) (*http.Response, error) {
	_, expect := r.Header["Expect"]
	if expect || r.Header.Get("Upgrade") != "" || r.Method == http.MethodConnect {
		return u.fallback.RoundTrip(r)
	}
	u.mu.Lock()
	if u.busy || u.closed {
		u.mu.Unlock()
		return u.fallback.RoundTrip(r)
	}
	u.busy = true
	c := u.idle
	u.idle = nil
	u.mu.Unlock()

	for retried := false; ; {
		if c != nil && !c.alive() {
			c.close()
			c = nil
		}
		if c == nil {
			var err error
			if c, err = u.dial(r.Context()); err != nil {
				u.release(nil)
				return nil, err
			}
		}
		resp, err := u.send(c, r)
		if err == nil {
			return resp, nil
		}
		c.close()
		var sw *switchRefused
		if !c.used || retried || !replayable(r) || r.Context().Err() != nil || errors.As(err, &sw) {
			u.release(nil)
			return nil, err
		}
		c, retried = nil, true // the server closed a kept-alive connection: once more on a new one
	}
}

// send writes r on c and reads the response head. The response body
// releases c when it ends: for reuse when read to the end, closed
// otherwise.
func (u *h1Upstream) send(c *h1Conn, r *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(r.Context(), c.close)
	var wrote chan error // the request body is written while the response is read
	if r.Body == nil || r.Body == http.NoBody {
		err := r.Write(c.bw)
		if err == nil {
			err = c.bw.Flush()
		}
		if err != nil {
			stop()
			return nil, err
		}
	} else {
		wrote = make(chan error, 1)
		go func() {
			err := r.Write(c.bw)
			if err == nil {
				err = c.bw.Flush()
			}
			wrote <- err
		}()
	}
	var resp *http.Response
	var wire []store.Header
	for {
		var err error
		wire, _ = peekResponseFields(c.br)
		if resp, err = http.ReadResponse(c.br, r); err != nil {
			stop()
			return nil, err // the caller closes c, which ends a body writer too
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// 1xx: hand it to the reverse proxy (it forwards 103 Early Hints)
		// and read on.
		if trace := httptrace.ContextClientTrace(r.Context()); trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
				stop()
				return nil, err
			}
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Upgrades go to fallback; a 101 here was not asked for.
		stop()
		return nil, refuseSwitch("", resp.Header)
	}
	if ex, _ := r.Context().Value(exchangeKey{}).(*exchange); ex != nil {
		ex.respWire = wire
	}
	c.used = true
	keep := !resp.Close && !r.Close
	done := func(eof bool) {
		ok := stop() && eof && keep
		if wrote != nil && ok {
			// The response is complete; the request body should be too. As
			// http.Transport, wait a little for it, then give up on the
			// connection (closing it ends the writer; a writer blocked on
			// the guest's body ends when the handler returns and the body
			// is closed).
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case err := <-wrote:
				ok = err == nil
			case <-t.C:
				ok = false
			}
			t.Stop()
		}
		if !ok {
			c.close()
			c = nil
		}
		u.release(c)
	}
	if resp.Body == http.NoBody {
		done(true)
		return resp, nil
	}
	resp.Body = &h1Body{rc: resp.Body, done: done}
	return resp, nil
}

// h1Body is a response body on an h1Conn; when it ends it releases the
// connection.
type h1Body struct {
	rc   io.ReadCloser
	done func(eof bool)
	once sync.Once
}

func (b *h1Body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		eof := err == io.EOF
		b.once.Do(func() { b.done(eof) })
	}
	return n, err
}

// Close before the end closes the connection first: closing an HTTP/1.1
// body that is not read to the end would otherwise read the rest of it.
func (b *h1Body) Close() error {
	b.once.Do(func() { b.done(false) })
	return b.rc.Close()
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
