package mcpgate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newRemoteTransport is the HTTP transport to every remote server of a
// Gateway: dialed through Config.DialContext, TLS verified against
// Config.Roots at each connection, no proxy from the environment.
func newRemoteTransport(cfg Config) *http.Transport {
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	roots := cfg.Roots
	if roots == nil {
		roots = func() (*x509.CertPool, error) { return nil, nil } // tls: nil RootCAs is the system roots
	}
	return &http.Transport{
		DialContext: dial,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			pool, err := roots()
			if err != nil {
				return nil, err
			}
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			raw, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}})
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return tc, nil
		},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
	}
}

// headerTransport adds a server's configured headers to each request to
// the configured URL's host, and to no other: they are its credentials.
type headerTransport struct {
	base    http.RoundTripper
	host    string
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != h.host {
		return h.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

func newRemoteClientTransport(base http.RoundTripper, cfg Server) mcp.Transport {
	host := ""
	if u, err := url.Parse(cfg.URL); err == nil {
		host = u.Host
	}
	return &mcp.StreamableClientTransport{
		Endpoint: cfg.URL,
		HTTPClient: &http.Client{
			Transport: headerTransport{base: base, host: host, headers: cfg.Headers},
			// A redirect is not followed: its target is a connection the
			// policy did not configure, and the server's headers must
			// not reach it. The call fails with this error.
			CheckRedirect: func(r *http.Request, _ []*http.Request) error {
				return fmt.Errorf("mcpgate: remote MCP server %q redirected to %s, which capsem does not follow; set url in [mcp.servers.%s] to the address it redirects to", cfg.Name, r.URL.Redacted(), cfg.Name)
			},
		},
	}
}
