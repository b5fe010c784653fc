package mcpgate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsem/capsem/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callHeader carries a POST's callTable token from Serve to the middleware:
// the SDK hands middleware the request's headers (RequestExtra.Header) but
// neither the JSON-RPC id nor the HTTP request's context. Serve removes any
// such header the guest sent.
const callHeader = "Capsem-Mcpgate-Call"

// callInfo is what Serve knows of one POST that the middleware needs.
type callInfo struct {
	decider Decider
	id      string // the message's JSON-RPC id as raw JSON; "" if not one request
	bytes   int64  // the POST body's size: the message's, as the MITM counts it
	// ctx ends when Serve returns: the guest has its answer or abandoned
	// the POST. The SDK runs a handler on a context of the session's, not
	// the POST's, so without it an abandoned call would run on for good.
	ctx    context.Context
	cancel context.CancelFunc
}

type callTable struct {
	next atomic.Uint64
	mu   sync.Mutex
	m    map[string]*callInfo
}

func (t *callTable) put(c *callInfo) string {
	tok := strconv.FormatUint(t.next.Add(1), 36)
	t.mu.Lock()
	t.m[tok] = c
	t.mu.Unlock()
	return tok
}

func (t *callTable) get(tok string) *callInfo {
	if tok == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[tok]
}

func (t *callTable) del(tok string) {
	t.mu.Lock()
	delete(t.m, tok)
	t.mu.Unlock()
}

// Serve answers one HTTP request of the guest for https://mcp.capsem.internal/NAME:
// r.URL.Path is /NAME, optionally followed by more path, which is ignored.
// An unknown NAME is answered 404 with a plain-text body naming the
// configured servers. d decides this request's tools/call and tools/list;
// nil refuses every tools/call and lists no tools.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, d Decider) {
	name, ok := serverName(r.URL.Path)
	e, names, closed := g.lookup(name)
	switch {
	case closed:
		http.Error(w, "mcpgate: the MCP gateway is closed (the sandbox is stopping); start the sandbox again", http.StatusServiceUnavailable)
		return
	case !ok || e == nil:
		conf := "none is configured"
		if len(names) > 0 {
			conf = "configured: " + strings.Join(names, ", ")
		}
		http.Error(w, fmt.Sprintf("mcpgate: no MCP server named %q (%s); server NAME of [mcp.servers] in the policy file is at https://%s/NAME", name, conf, policy.MCPGatewayHost), http.StatusNotFound)
		return
	}
	r = r.Clone(r.Context())
	r.Header.Del(callHeader)
	if r.Method == http.MethodPost && r.Header.Get(sessionIDHeader) == "" {
		// A POST without a session may start one: bounded per server, and
		// closed again if the server went away while it was served.
		if !e.admitSession() {
			http.Error(w, fmt.Sprintf("mcpgate: MCP server %q has %d live sessions, the most capsem keeps per server; "+
				"end the sessions you no longer use (an HTTP DELETE with their Mcp-Session-Id) or let them idle for %v, then initialize again",
				name, maxSessions, sessionTimeout), http.StatusServiceUnavailable)
			return
		}
		defer e.endSessionPOST()
	}
	if r.Method == http.MethodPost && r.Body != nil {
		// Read up to the SDK's own limit; a longer body is handed on whole
		// for the SDK to refuse (413).
		body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
		if err != nil {
			http.Error(w, "mcpgate: reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		info := &callInfo{decider: d, bytes: int64(len(body))}
		info.ctx, info.cancel = context.WithCancel(context.Background())
		defer info.cancel()
		if len(body) <= mcp.DefaultMaxRequestBodyBytes {
			info.id = peekID(body)
		}
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		tok := g.calls.put(info)
		defer g.calls.del(tok)
		r.Header.Set(callHeader, tok)
	}
	e.handler.ServeHTTP(w, r)
}

// sessionIDHeader is streamable HTTP's session header: a POST without it
// starts a session (the SDK's handler creates one for it).
const sessionIDHeader = "Mcp-Session-Id"

const (
	// sessionTimeout ends a guest session no request came on for this
	// long. Without it sessions lived until Close: 2,000 initialize POSTs
	// left 2,000 sessions (their goroutines and 8 MiB). Agents idle for
	// minutes while the model thinks, far less than ten; a guest whose
	// session ended is answered 404 to its next request, on which MCP
	// clients initialize again.
	sessionTimeout = 10 * time.Minute
	// maxSessions caps a server's live guest sessions: an agent keeps one
	// per server, a sandbox runs a few agents and subagents; 64 is far
	// above that and bounds a looping guest at about 256 KiB per server.
	maxSessions = 64
)

// admitSession reports whether a POST that may start a session is served:
// the live sessions and such POSTs in flight stay within maxSessions.
// endSessionPOST must follow an admitted one.
func (e *entry) admitSession() bool {
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	n := e.starting
	for range e.srv.Sessions() {
		n++
	}
	if n >= maxSessions {
		return false
	}
	e.starting++
	return true
}

// endSessionPOST ends a POST admitted by admitSession. A session it started
// for a server that Apply removed, or Close ended, meanwhile (they close the
// sessions they saw, not one made after) is closed here.
func (e *entry) endSessionPOST() {
	e.sessMu.Lock()
	e.starting--
	e.sessMu.Unlock()
	if e.dead.Load() {
		e.closeSessions()
	}
}

// closeSessions ends every guest session of e.
func (e *entry) closeSessions() {
	for ss := range e.srv.Sessions() {
		ss.Close()
	}
}

// serverName is NAME of a path /NAME or /NAME/...
func serverName(path string) (string, bool) {
	p := strings.TrimPrefix(path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	return p, p != ""
}

func (g *Gateway) newEntry(s Server) *entry {
	e := &entry{g: g, name: s.Name}
	e.srv = mcp.NewServer(&mcp.Implementation{Name: "capsem-mcpgate-" + s.Name, Version: "1"}, &mcp.ServerOptions{
		Logger: g.log,
		// The guest sees the backend's capabilities (proxy.go); none of
		// the SDK server's own.
		Capabilities: &mcp.ServerCapabilities{},
	})
	e.srv.AddReceivingMiddleware(e.middleware)
	e.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return e.srv }, &mcp.StreamableHTTPOptions{
		Logger: g.log,
		// The check refuses a loopback connection whose Host is not
		// loopback (DNS rebinding from a host browser). The gateway is
		// not on a host socket: capsem's MITM hands it the guest's
		// requests for mcp.capsem.internal, whatever socket carries them.
		DisableLocalhostProtection: true,
		SessionTimeout:             sessionTimeout,
	})
	e.be = newBackend(g, e, s)
	return e
}
