package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/capsem/capsem/mitm/internal/fieldorder"
	"github.com/capsem/capsem/store"
)

// aLongTimeAgo is a deadline in the past: a read with it returns what is
// buffered, or times out at once.
var aLongTimeAgo = time.Unix(1, 0)

// h1Upstream forwards the requests of a guest HTTP/1.1 connection over
// upstream HTTP/1.1 keep-alive connections of the pool (pool.go), in the
// handler's own goroutine: the request is written and the response read
// right there, where http.Transport would hand each request to a writer
// goroutine and each response over from a reader goroutine (four
// goroutine switches per request, about a tenth of the MITM's cost per
// small request).
//
// What this path does not handle goes to the pool's HTTP/1.1
// http.Transport: upgrades (WebSocket) and Expect: 100-continue.
type h1Upstream struct {
	f    *Flow
	last atomic.Pointer[upstreamPool]
}

type h1Conn struct {
	tc        *tls.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	used      bool      // a response was read on it: a failure may mean the server closed it while idle
	idleSince time.Time // when it was last put in its pool
}

// close closes the TCP connection under TLS: it aborts blocked reads and
// writes at once, where tls.Conn.Close would first try to send an alert.
func (c *h1Conn) close() { c.tc.NetConn().Close() }

// alive says whether an idle connection can carry a request: the server
// has not closed it and has sent nothing unasked — not in the reader, not
// in crypto/tls's own buffer (a record that came in the same segment as
// the last response: a read that cannot wait returns it, and times out
// when there is none), not on the socket (a peek that would block).
func (c *h1Conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	c.tc.SetReadDeadline(aLongTimeAgo)
	_, err := c.br.Peek(1)
	c.tc.SetReadDeadline(time.Time{})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false // bytes nobody asked for, or the connection failed
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

// dialH1 opens an upstream HTTP/1.1 connection for the pool.
func (up *upstreamPool) dialH1(ctx context.Context) (*h1Conn, error) {
	raw, err := up.dial(ctx)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, up.tlsH1)
	hctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	err = tc.HandshakeContext(hctx)
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
	pol := u.f.policyOf(r)
	up, err := u.f.t.pools.get(&u.f.t.roots, u.f.flow, pol, &u.last)
	if err != nil {
		return nil, err
	}
	_, expect := r.Header["Expect"]
	if expect || r.Header.Get("Upgrade") != "" || r.Method == http.MethodConnect {
		up.touch()
		return up.h1t.RoundTrip(r)
	}
	c := up.take()
	for retried := false; ; {
		if c == nil {
			if c, err = up.dialH1(r.Context()); err != nil {
				return nil, err
			}
		}
		resp, err := u.send(up, c, r)
		if err == nil {
			return resp, nil
		}
		c.close()
		var sw *SwitchRefused
		if !c.used || retried || !replayable(r) || r.Context().Err() != nil || errors.As(err, &sw) {
			return nil, err
		}
		c, retried = nil, true // the server closed a kept-alive connection: once more on a new one
	}
}

// send writes r on c and reads the response head. The response body
// releases c when it ends: back to up when read to the end, closed
// otherwise.
func (u *h1Upstream) send(up *upstreamPool, c *h1Conn, r *http.Request) (*http.Response, error) {
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
		wire, _ = fieldorder.PeekResponse(c.br)
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
		return nil, UnaskedSwitch(resp.Header)
	}
	if req := requestOf(r.Context()); req != nil {
		req.Wire = wire
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
		if ok {
			up.put(c)
		} else {
			c.close()
		}
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
