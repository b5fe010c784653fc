package netstack

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/capsem/capsem/policy"
)

// proxyTarget is the host:port a CONNECT asks the proxy for: the name,
// or its [upstream] resolve target, never an address capsem resolved (the
// proxy resolves, so the host needs no DNS of its own).
func proxyTarget(pol *policy.Policy, name string, port uint16) string {
	host := name
	if t, ok := pol.Resolve(name); ok {
		host = t.Host
		if t.Port != 0 {
			port = t.Port
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// dialProxy connects to name:port through proxy x: a TCP connection to the
// proxy, then CONNECT, with the proxy's credentials (the real value of its
// [[secret]], "user:password") when the policy names one. A proxy that
// refuses is an error that says what it answered.
func (s *Stack) dialProxy(ctx context.Context, pol *policy.Policy, x *policy.Proxy, name string, port uint16) (net.Conn, string, error) {
	target := proxyTarget(pol, name, port)
	c, err := s.cfg.Dial(ctx, "tcp", x.Addr)
	if err != nil {
		return nil, ReasonUpstreamFailed, fmt.Errorf("the proxy %s (%s) did not accept the connection: %w", x.URL, x.Addr, err)
	}
	tunnel, err := connect(ctx, c, target, pol.ProxyCredentials())
	if err != nil {
		c.Close()
		var refused *proxyRefused
		if errors.As(err, &refused) {
			return nil, ReasonUpstreamProxyRefused, fmt.Errorf("the proxy %s refused CONNECT %s: %w", x.URL, target, err)
		}
		return nil, ReasonUpstreamFailed, fmt.Errorf("the proxy %s: CONNECT %s: %w", x.URL, target, err)
	}
	return tunnel, "", nil
}

// proxyRefused is a proxy's answer other than 2xx to a CONNECT.
type proxyRefused struct {
	status string
	auth   bool // it asked for credentials (407)
	sent   bool // credentials were sent
}

func (e *proxyRefused) Error() string {
	switch {
	case e.auth && e.sent:
		return e.status + ": it did not accept the credentials of [upstream] proxy_secret"
	case e.auth:
		return e.status + ": it wants credentials; set [upstream] proxy_secret to a [[secret]] holding \"user:password\""
	}
	return e.status
}

// connectTimeout bounds the proxy's answer to a CONNECT when the dial's
// context has no deadline of its own.
const connectTimeout = 30 * time.Second

// connect asks the proxy on c for a tunnel to target and returns the
// tunnel once it answers 2xx.
func connect(ctx context.Context, c net.Conn, target string, creds []byte) (net.Conn, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(connectTimeout)
	}
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if creds != nil {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString(creds) + "\r\n"
	}
	if _, err := c.Write([]byte(req + "\r\n")); err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("no answer a proxy gives: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, &proxyRefused{status: resp.Status, auth: resp.StatusCode == http.StatusProxyAuthRequired, sent: creds != nil}
	}
	_ = c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// Bytes of the tunnel that came with the answer: read them first.
		return &bufferedConn{Conn: c, r: br}, nil
	}
	return c, nil
}

// bufferedConn is a tunnel whose first bytes were read with the proxy's
// answer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
