package mcpgate

import (
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsem/capsem/ask"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Decider decides the tools/call requests of the guest; *policy.Policy is
// one. A Decider that also has PreviewBytes() int sets the preview size of
// the calls it decides.
type Decider interface {
	// DecideMCPTool decides a call of tool on the gateway server named
	// server.
	DecideMCPTool(server, tool string) policy.Decision
	// MCPHideDenied reports whether tools/list leaves denied tools out.
	MCPHideDenied() bool
	// MCPAskTimeout is how long a call it leaves to a person waits.
	MCPAskTimeout() time.Duration
}

// Recorder takes the gateway's events; a store.Writer is one.
type Recorder interface {
	Append(store.Event)
}

// Server is one [mcp.servers.NAME] of the policy: exactly one of Command and
// URL is set.
type Server struct {
	Name string
	// Command is a stdio server's program and arguments, run on the host.
	Command []string
	// Env is what a stdio server gets besides capsem's PATH and HOME (and
	// overrides them).
	Env map[string]string
	// Cwd is a stdio server's working directory; "" is capsem's.
	Cwd string
	// URL is a remote streamable-HTTP server's endpoint.
	URL string
	// Headers are added to every request to a remote server.
	Headers map[string]string
}

func (s Server) same(o Server) bool {
	return s.Name == o.Name && slices.Equal(s.Command, o.Command) && maps.Equal(s.Env, o.Env) &&
		s.Cwd == o.Cwd && s.URL == o.URL && maps.Equal(s.Headers, o.Headers)
}

// Config configures a Gateway.
type Config struct {
	// Recorder takes one event per call; nil: events are dropped.
	Recorder Recorder
	// Log takes the servers' stderr and the gateway's troubles; nil: discard.
	Log *slog.Logger
	// PreviewBytes caps request_preview, response_preview and
	// error_message where the call's Decider has no PreviewBytes() int
	// (*policy.Policy has: its [http] preview_bytes, as reloaded), and of
	// the gateway's own events; 0: 1024.
	PreviewBytes int
	// DialContext connects to remote servers; nil: a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Roots returns the pool remote servers are verified against, asked at
	// every new connection, since a reload may change [upstream] ca_files
	// (the MITM's UpstreamRoots); nil: the system roots.
	Roots func() (*x509.CertPool, error)
	// Asks is asked about the tools no [[mcp.rules]] names while the
	// policy says [mcp] unknown = "ask"; the call waits for the answer.
	// Nil: nobody is asked, and such calls are refused at once
	// (ask-unanswered).
	Asks *ask.Broker
}

const defaultPreviewBytes = 1024

// Gateway serves the configured MCP servers to one sandbox.
type Gateway struct {
	cfg    Config
	log    *slog.Logger
	remote *http.Transport

	calls callTable

	mu      sync.Mutex
	servers map[string]*entry
	closed  bool
}

// entry is one configured server: its guest-facing SDK server and handler,
// which live as long as the name is configured, and its backend, which is
// replaced when the config changes.
type entry struct {
	g       *Gateway
	name    string
	srv     *mcp.Server
	handler http.Handler

	mu sync.Mutex
	be *backend

	// dead is set when Apply removed the entry or Close ended it.
	dead atomic.Bool
	// sessMu guards starting, the admitted POSTs that may start a session.
	sessMu   sync.Mutex
	starting int
}

func (e *entry) backend() *backend {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.be
}

// New returns a Gateway with no servers; Apply configures them.
func New(cfg Config) *Gateway {
	if cfg.PreviewBytes <= 0 {
		cfg.PreviewBytes = defaultPreviewBytes
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Gateway{
		cfg:     cfg,
		log:     log,
		remote:  newRemoteTransport(cfg),
		servers: map[string]*entry{},
		calls:   callTable{m: map[string]*callInfo{}},
	}
}

// Apply makes servers the configured set: a new name is served from now on
// (its process starts on its first call), a removed one is no longer served
// and its process stopped, a changed one keeps its guest sessions but its
// process is stopped and the next call starts the new config. When Apply
// returns, the processes it stopped have exited. After Close it does
// nothing.
func (g *Gateway) Apply(servers []Server) {
	var stop []*backend
	var closeSessions []*entry
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	want := map[string]Server{}
	for _, s := range servers {
		want[s.Name] = s
	}
	for name, e := range g.servers {
		s, ok := want[name]
		if !ok {
			delete(g.servers, name)
			e.dead.Store(true)
			stop = append(stop, e.backend())
			closeSessions = append(closeSessions, e)
			continue
		}
		e.mu.Lock()
		if !e.be.cfg.same(s) {
			stop = append(stop, e.be)
			e.be = newBackend(g, e, s)
		}
		e.mu.Unlock()
	}
	for name, s := range want {
		if _, ok := g.servers[name]; !ok {
			g.servers[name] = g.newEntry(s)
		}
	}
	g.mu.Unlock()
	// The backends first: closing a guest session waits for its calls,
	// which end once their backend has stopped (a start in progress is
	// cancelled, a call in flight fails).
	stopAll(stop)
	for _, e := range closeSessions {
		e.closeSessions()
	}
}

// Close stops every server process and ends every guest session; Serve
// answers 503 afterwards.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	var stop []*backend
	var es []*entry
	for name, e := range g.servers {
		e.dead.Store(true)
		stop = append(stop, e.backend())
		es = append(es, e)
		delete(g.servers, name)
	}
	g.mu.Unlock()
	stopAll(stop) // first, as in Apply
	for _, e := range es {
		e.closeSessions()
	}
	g.remote.CloseIdleConnections()
	return nil
}

func stopAll(bs []*backend) {
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Go(b.stop)
	}
	wg.Wait()
}

func (g *Gateway) lookup(name string) (e *entry, names []string, closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, nil, true
	}
	if e, ok := g.servers[name]; ok {
		return e, nil, false
	}
	return nil, slices.Sorted(maps.Keys(g.servers)), false
}
