package mcpgate

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/capsem/capsem/policy"
)

var _ Decider = (*policy.Policy)(nil)

// ServeMCP serves a request under pol, the policy in force when it
// arrived: the MITM's MCPGateway.
func (g *Gateway) ServeMCP(w http.ResponseWriter, r *http.Request, pol *policy.Policy) {
	if pol == nil {
		g.Serve(w, r, nil) // no policy to ask: every tools/call refused
		return
	}
	g.Serve(w, r, pol)
}

// ApplyPolicy applies pol's [mcp.servers]: at start, and on every reload.
func (g *Gateway) ApplyPolicy(pol *policy.Policy) {
	ps := pol.MCPServers()
	servers := make([]Server, 0, len(ps))
	for _, s := range ps {
		servers = append(servers, Server{Name: s.Name, Command: s.Command, Env: s.Env, Cwd: s.Cwd, URL: s.URL, Headers: s.Headers})
	}
	g.Apply(servers)
}

// PortDialer adapts a dialer of name and port (netstack's DialUpstream) to
// Config.DialContext.
func PortDialer(dial func(ctx context.Context, name string, port uint16) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("mcpgate: remote server address %q: %w", addr, err)
		}
		port, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("mcpgate: remote server port %q: %w", p, err)
		}
		return dial(ctx, host, uint16(port))
	}
}
