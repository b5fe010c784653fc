package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"syscall"
	"time"

	"github.com/capsem/capsem/store"
)

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
