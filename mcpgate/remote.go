package mcpgate

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newRemoteTransport is the HTTP transport to every remote server of a
// Gateway: dialed through Config.DialContext, TLS verified against
// Config.RootCAs, no proxy from the environment.
func newRemoteTransport(cfg Config) *http.Transport {
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	return &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
	}
}

// headerTransport adds a server's configured headers to each request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

func newRemoteClientTransport(base http.RoundTripper, cfg Server) mcp.Transport {
	return &mcp.StreamableClientTransport{
		Endpoint:   cfg.URL,
		HTTPClient: &http.Client{Transport: headerTransport{base: base, headers: cfg.Headers}},
	}
}
