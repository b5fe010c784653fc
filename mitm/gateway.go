package mitm

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// MCPGateway serves the MCP gateway's requests (package mcpgate): the
// requests of a flow to policy.MCPGatewayHost, which capsem serves itself.
// It decides each call with pol, the policy in force when the request
// arrived, and records the MCP calls itself; the MITM records only the
// HTTP request, as for any host.
type MCPGateway interface {
	ServeMCP(w http.ResponseWriter, r *http.Request, pol *policy.Policy)
}

// noUpstream stands in for the upstream connection of a local flow, which
// netstack does not dial: a closed pipe, so that nothing written to it goes
// anywhere and closing it again is harmless.
func noUpstream() net.Conn {
	a, b := net.Pipe()
	b.Close()
	return a
}

// serveGateway hands an allowed request of a local flow to the gateway.
// The request went through the same checks as any (Host is the SNI, the
// flow is still allowed, no tunnel, the store records); its body is not
// scanned for secrets, since it reaches no upstream of the guest's choosing,
// only the servers the policy configures.
func (ex *exchange) serveGateway(w http.ResponseWriter, r *http.Request) {
	gw := ex.p.cfg.MCPGateway
	if gw == nil {
		ex.refuse(w, http.StatusServiceUnavailable, ReasonLocalUnserved, "no MCP gateway serves this capsem",
			"capsem's MCP gateway is not running in this process. Tell the user: the [mcp.servers] of the policy need capsem's MITM, "+
				"which serves them at https://"+policy.MCPGatewayHost+"/NAME.")
		return
	}
	ex.ev.Decision, ex.ev.Reason = store.Allowed, policy.ReasonAllowed
	ex.ev.MatchedRule = "[mcp.servers]"
	cw := &countingWriter{ResponseWriter: w}
	if r.Body != nil && r.Body != http.NoBody {
		cb := &countingBody{rc: r.Body}
		r.Body = cb
		defer func() { ex.ev.BytesSent = cb.n.Load() }()
	}
	gw.ServeMCP(cw, r, ex.pol)
	ex.ev.StatusCode = cw.status
	if ex.ev.StatusCode == 0 {
		ex.ev.StatusCode = http.StatusOK
	}
	ex.gatewayBytes = cw.n.Load()
}

// countingWriter counts what a handler writes and keeps its status; Unwrap
// lets http.ResponseController flush an event stream through it.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      atomic.Int64
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// countingBody counts a request body as the handler reads it.
type countingBody struct {
	rc io.ReadCloser
	n  atomic.Int64
}

func (c *countingBody) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingBody) Close() error { return c.rc.Close() }
