package mitm

import (
	"fmt"
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
// flow is still allowed, no tunnel, the store records), and its body is
// scanned like any egress — the servers behind the gateway reach the
// outside with the host's credentials, so a secret's placeholder or a
// credential sent to them is as much a leak as one sent anywhere. The body
// is held whole (the gateway's MCP SDK reads it whole), within the held
// bodies' budgets.
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
	if !ex.holdGatewayBody(w, r) {
		return
	}
	held := r.Body
	if !ex.guard(w, r) || r.Body != held && !ex.holdGatewayBody(w, r) {
		return
	}
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

// holdGatewayBody reads a gateway request's body whole (as the MCP SDK
// would, but within the budgets), and gives it to the next reader as a
// stream of unknown length, so that the guard scans it as it streams
// rather than holding a second copy; the second call holds what the guard
// let through. False when it answered the guest itself.
func (ex *exchange) holdGatewayBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	held, ok := ex.holdBody(w, r, r.Body, gatewayMaxHold)
	switch {
	case !ok:
		return false
	case held.Over():
		ex.refuse(w, http.StatusRequestEntityTooLarge, ReasonBodyHoldBudget,
			fmt.Sprintf("a request body over %d bytes to the MCP gateway", gatewayMaxHold),
			"capsem reads a request to its MCP gateway whole before handing it on. Send smaller requests.")
		return false
	}
	r.Body, r.ContentLength = held, -1
	r.Header.Del("Content-Length")
	return true
}

// gatewayMaxHold is the largest request body the gateway is handed: its
// MCP SDK reads a body whole, and JSON-RPC requests are small (a
// tools/call's arguments), as for the MCP inspector's bodies it holds.
const gatewayMaxHold = 4 << 20

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
