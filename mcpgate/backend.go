package mcpgate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// backendProtocol is the protocol version the gateway asks its servers for:
// the newest of the initialize handshake. With 2026-07-28 the SDK client
// would speak the sessionless protocol, whose client-side TTL caches answer
// list calls without asking the server (the record would show calls the
// server never saw), and whose list_changed needs a subscription stream.
const backendProtocol = "2025-11-25"

// startTimeout bounds starting a server and its initialize handshake: an
// npx-run server that downloads its package on first use takes about ten
// seconds; thirty leaves room without hanging a call for good.
const startTimeout = 30 * time.Second

// stopGrace is how long a stopped stdio server gets to exit after its stdin
// is closed before its process group is killed: the SDK's own servers and
// node ones exit within milliseconds of EOF, and a sandbox's stop should not
// wait on one that does not.
const stopGrace = 2 * time.Second

// backend is the gateway's client session with one server, started on the
// first call and started again on the next call after it died.
type backend struct {
	g    *Gateway
	e    *entry
	cfg  Server
	impl *mcp.Client

	mu      sync.Mutex // held while starting
	cs      *mcp.ClientSession
	done    chan struct{} // closed when cs ended
	proc    *process      // stdio servers only
	stopped bool
}

func newBackend(g *Gateway, e *entry, cfg Server) *backend {
	b := &backend{g: g, e: e, cfg: cfg}
	b.impl = mcp.NewClient(&mcp.Implementation{Name: "capsem-mcpgate", Version: "1"}, &mcp.ClientOptions{
		Logger: g.log,
		// No roots, sampling or elicitation: a host-side server gets
		// nothing from the guest but the calls the policy lets through.
		Capabilities:               &mcp.ClientCapabilities{},
		ToolListChangedHandler:     func(_ context.Context, r *mcp.ToolListChangedRequest) { e.listChanged(listTools, r.Params) },
		PromptListChangedHandler:   func(_ context.Context, r *mcp.PromptListChangedRequest) { e.listChanged(listPrompts, r.Params) },
		ResourceListChangedHandler: func(_ context.Context, r *mcp.ResourceListChangedRequest) { e.listChanged(listResources, r.Params) },
	})
	return b
}

// session returns the live client session, starting the server if it was
// never started or died since the last call.
func (b *backend) session(ctx context.Context) (*mcp.ClientSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil, fmt.Errorf("mcpgate: server %q was removed or reconfigured while this call waited; call again", b.cfg.Name)
	}
	if b.cs != nil {
		select {
		case <-b.done:
		default:
			if b.proc == nil || !b.proc.hasExited() {
				return b.cs, nil
			}
		}
		b.restarted()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	var (
		t   mcp.Transport
		err error
	)
	switch {
	case len(b.cfg.Command) > 0 && b.cfg.URL == "":
		b.proc, t, err = startProcess(b.cfg, b.g.log)
		if err != nil {
			return nil, err
		}
	case b.cfg.URL != "" && len(b.cfg.Command) == 0:
		t = newRemoteClientTransport(b.g.remote, b.cfg)
	default:
		return nil, fmt.Errorf("mcpgate: server %q needs exactly one of command and url in [mcp.servers.%s] of the policy file", b.cfg.Name, b.cfg.Name)
	}
	cs, err := b.impl.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: backendProtocol})
	if err != nil {
		how := ""
		if b.proc != nil {
			b.proc.stop(0)
			how = " (" + b.proc.describe() + ")"
			b.proc = nil
		}
		return nil, fmt.Errorf("mcpgate: starting MCP server %q: %v%s; check its command, url and env in [mcp.servers.%s]", b.cfg.Name, err, how, b.cfg.Name)
	}
	b.cs = cs
	b.done = make(chan struct{})
	go func(done chan struct{}) {
		_ = cs.Wait()
		close(done)
	}(b.done)
	return cs, nil
}

// restarted clears a dead session (b.mu held) and records, for a stdio
// server, how its process ended.
func (b *backend) restarted() {
	cs, proc := b.cs, b.proc
	b.cs, b.proc = nil, nil
	go cs.Close()
	if proc == nil {
		b.g.log.Warn("mcpgate: the session with a remote MCP server ended; reconnecting", "server", b.cfg.Name)
		return
	}
	var how string
	if proc.hasExited() {
		how = "the server process ended: " + proc.describe()
	} else {
		proc.stop(0)
		how = "the MCP session with the server process ended, so capsem killed it: " + proc.describe()
	}
	b.g.log.Warn("mcpgate: restarting MCP server", "server", b.cfg.Name, "how", how)
	b.g.record(&store.MCPCall{
		ServerName:   b.cfg.Name,
		Method:       MethodServerRestarted,
		Decision:     store.Allowed,
		Reason:       reasonAllowed,
		ErrorMessage: how + "; capsem started it again for the next call",
	})
}

// MethodServerRestarted is the method of the MCPCall the gateway records
// when a stdio server it started had died and the next call starts it again;
// its error_message says how the process ended.
const MethodServerRestarted = "capsem/server-restarted"

// stop ends the session and the process; calls after it fail.
func (b *backend) stop() {
	b.mu.Lock()
	b.stopped = true
	cs, proc := b.cs, b.proc
	b.cs, b.proc = nil, nil
	b.mu.Unlock()
	if cs != nil {
		closed := make(chan struct{})
		go func() {
			_ = cs.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(stopGrace):
		}
	}
	if proc != nil {
		proc.stop(stopGrace)
	}
}
