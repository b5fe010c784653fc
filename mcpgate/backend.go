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

// Restart backoff: a guest looping on a tool that crashes its server had
// capsem start a process per call (about 7 a second) and record a restart
// each. After the second death or failed start in a row, calls are answered
// at once with an error until the backoff has passed: 1 s, doubling, at most
// 60 s. A process that lived backoffReset resets it.
const (
	backoffFirst = time.Second
	backoffMax   = time.Minute
	backoffReset = time.Minute
)

// backoffDelay is the wait before the next start after fails deaths or
// failed starts in a row: none after the first, so that one crash costs
// the guest nothing.
func backoffDelay(fails int) time.Duration {
	if fails < 2 {
		return 0
	}
	d := backoffFirst
	for i := 2; i < fails && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// backend is the gateway's client session with one server, started on the
// first call and started again on the next call after it died.
type backend struct {
	g    *Gateway
	e    *entry
	cfg  Server
	impl *mcp.Client
	// ctx ends when stop is called: it cancels a start in progress.
	ctx    context.Context
	cancel context.CancelFunc
	// stderr is the log budget of all the processes of the backend: a
	// server restarted in a loop must not fill capsem's log either.
	stderr *stderrBudget

	mu      sync.Mutex // held while starting
	cs      *mcp.ClientSession
	done    chan struct{} // closed when cs ended
	proc    *process      // stdio servers only
	stopped bool
	// started is when cs was started; fails counts the deaths and failed
	// starts in a row; retryAt is when the next start may be tried, and
	// lastEnd says how the last one ended.
	started time.Time
	fails   int
	retryAt time.Time
	lastEnd string
}

func newBackend(g *Gateway, e *entry, cfg Server) *backend {
	b := &backend{g: g, e: e, cfg: cfg, stderr: &stderrBudget{}}
	b.ctx, b.cancel = context.WithCancel(context.Background())
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
	if now := time.Now(); now.Before(b.retryAt) {
		why := fmt.Sprintf("mcpgate: MCP server %q keeps dying (%d times in a row within %v of its start); capsem starts it again at %s (in %v) and answers calls with this error until then",
			b.cfg.Name, b.fails, backoffReset, b.retryAt.UTC().Format(time.RFC3339), b.retryAt.Sub(now).Round(time.Second))
		return nil, &hostDetailError{
			host:  fmt.Errorf("%s; last: %s; check its command, url and env in [mcp.servers.%s]", why, b.lastEnd, b.cfg.Name),
			guest: why + "; capsem's record on the host says why",
		}
	}
	cs, err := b.start()
	if err != nil {
		b.failed(err.Error())
		return nil, &hostDetailError{host: err, guest: fmt.Sprintf("mcpgate: MCP server %q failed to start; capsem's record on the host says why", b.cfg.Name)}
	}
	b.cs, b.started = cs, time.Now()
	b.done = make(chan struct{})
	go func(done chan struct{}) {
		_ = cs.Wait()
		close(done)
	}(b.done)
	return cs, nil
}

// start starts the server and its session (b.mu held); stop cancels it.
func (b *backend) start() (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(b.ctx, startTimeout)
	defer cancel()
	var (
		t   mcp.Transport
		err error
	)
	switch {
	case len(b.cfg.Command) > 0 && b.cfg.URL == "":
		b.proc, t, err = startProcess(b.cfg, b.g.log, b.stderr)
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
	return cs, nil
}

// failed counts a death or failed start (b.mu held) and sets when the next
// start may be tried.
func (b *backend) failed(how string) {
	if !b.started.IsZero() && time.Since(b.started) >= backoffReset {
		b.fails = 0
	}
	b.started = time.Time{}
	b.fails++
	b.lastEnd = how
	b.retryAt = time.Now().Add(backoffDelay(b.fails))
}

// restarted clears a dead session (b.mu held), kills what is left of a
// stdio server's process group and records how its process ended.
func (b *backend) restarted() {
	cs, proc := b.cs, b.proc
	b.cs, b.proc = nil, nil
	go cs.Close()
	if proc == nil {
		b.g.log.Warn("mcpgate: the session with a remote MCP server ended; reconnecting", "server", b.cfg.Name)
		b.failed("the session with the remote server ended")
		return
	}
	var how string
	exited := proc.hasExited()
	// Always: the leader may be gone while what it started (npx's node,
	// uvx's python) lives on in its group.
	proc.stop(0)
	if exited {
		how = "the server process ended: " + proc.describe()
	} else {
		how = "the MCP session with the server process ended, so capsem killed it: " + proc.describe()
	}
	b.failed(how)
	again := "capsem starts it again on the next call"
	if b.retryAt.After(time.Now()) {
		again = fmt.Sprintf("it ended %d times in a row within %v of its start, so capsem starts it again on the first call after %s", b.fails, backoffReset, b.retryAt.UTC().Format(time.RFC3339))
	}
	b.g.log.Warn("mcpgate: MCP server ended", "server", b.cfg.Name, "how", how, "retry_at", b.retryAt)
	b.g.record(&store.MCPCall{
		ServerName:   b.cfg.Name,
		Method:       MethodServerRestarted,
		Decision:     store.Allowed,
		Reason:       reasonAllowed,
		ErrorMessage: how + "; " + again,
	}, b.g.cfg.PreviewBytes)
}

// MethodServerRestarted is the method of the MCPCall the gateway records
// when a next call finds that a stdio server it started had died; its
// error_message says how the process ended and when capsem starts it again
// (at once, or after the restart backoff).
const MethodServerRestarted = "capsem/server-restarted"

// stop ends the session and the process, cancelling a start in progress;
// calls after it fail.
func (b *backend) stop() {
	b.cancel()
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
