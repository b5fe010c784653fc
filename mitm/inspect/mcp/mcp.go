package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/ask"

	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/internal/contentcoding"
	"github.com/capsem/capsem/mitm/internal/mcpscan"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// MCP over HTTP is recognised by its content, on any allowed host and
// path: a POST whose JSON body is JSON-RPC 2.0 (streamable HTTP, or the
// older HTTP+SSE transport's message endpoint), and an event stream whose
// events carry JSON-RPC (a POST's SSE response, the GET stream of either
// transport). Every request and notification becomes one mcp_call event,
// with its response when one is seen (track.go matches responses that
// come on another stream); a tools/call an [[mcp.rules]] entry denies is
// answered by capsem (deny.go) and never forwarded; a tools/list result
// loses the tools the policy denies under [mcp] hide_denied.

// Inspector sees MCP in the exchanges; its tracker matches responses to
// requests across the streams of a session.
type Inspector struct {
	rec  Recorder
	t    *mcpTracker
	asks *ask.Broker // nil: nobody is asked
}

// Recorder is where mcp_call events go: the session's log.
type Recorder interface{ Append(store.Event) }

// New returns the inspector; it records its events in rec and asks asks
// about the tools the policy leaves to a person (nil: nobody is asked,
// and they are refused). Close records the calls still waiting for a
// response.
func New(rec Recorder, asks *ask.Broker) *Inspector {
	in := &Inspector{rec: rec, asks: asks}
	in.t = newMCPTracker(in.record)
	return in
}

// Close records every call still waiting: the proxy is stopping.
func (in *Inspector) Close() error {
	in.t.close()
	return nil
}

// record appends one mcp_call event.
func (in *Inspector) record(c *mcpCall) {
	rec := c.rec
	in.rec.Append(store.Event{Kind: store.KindMCPCall, MCPCall: &rec})
}

// Begin is inspect.Inspector's: a request that may carry MCP gets a view.
// An AI-provider call is not MCP, unless the host has MCP deny rules:
// then what a path looks like decides nothing, and the body is read for
// both.
func (in *Inspector) Begin(x inspect.Exchange, r *http.Request) inspect.Stream {
	pol, host := x.Policy(), x.Host()
	mayDeny := pol.MCPMayDeny(host)
	// The core's upgrade check leaves an Upgrade header on a WebSocket
	// handshake it lets through, and on nothing else.
	if _, ws := r.Header["Upgrade"]; ws && mayDeny {
		x.Refuse(http.StatusForbidden, policy.ReasonMCPToolDenied, "a WebSocket upgrade to a host with [[mcp.rules]] deny entries",
			"capsem decides the MCP tool calls to this host before forwarding them, and does not read MCP carried over WebSocket. "+
				"Use MCP's HTTP transports (streamable HTTP) with this host.")
		return nil
	}
	if x.Flow().Local || x.Claimed() != "" && !mayDeny || !mcpCandidate(r, mayDeny) {
		return nil
	}
	return in.newView(x, r, mayDeny)
}

// view is the MCP side of one exchange.
type view struct {
	x       inspect.Exchange
	in      *Inspector
	t       *mcpTracker
	pol     *policy.Policy
	host    string
	method  string // the request's
	path    string
	mayDeny bool   // the host has deny rules: the body is decided before it goes
	claimed bool   // another inspector's (a model call): the response is not MCP
	server  string // server_name: host and path, without scheme or query
	sess    *mcpSession
	own     bool // sess is this exchange's alone (no session id, no endpoint)
	// stream is the HTTP+SSE GET stream this exchange opened, once it
	// announced its endpoint.
	stream *sseRewriter

	body *mcpscan.Body // the request body's parser
	tap  io.Writer     // body, when the request's body is read

	mu    sync.Mutex
	rpc   bool       // the request body held a whole JSON-RPC message
	calls []*mcpCall // this exchange's requests, in order
	notes []*mcpCall // notifications in the request, recorded when it ends
	batch bool       // the request body was a batch
}

// mcpAmbiguousRule is the matched_rule of a message refused because it is
// ambiguous (mcpscan.Message.Ambiguous) on a host with deny rules.
const mcpAmbiguousRule = "(an ambiguous message: a deciding member twice or in another case, or a name too long to decide)"

// mcpSessionHeader is streamable HTTP's session header.
const mcpSessionHeader = "Mcp-Session-Id"

// mcpCandidate reports whether a request may carry MCP: a POST with a JSON
// body, or a GET asking for an event stream. To a host with deny rules
// (mayDeny) any request with a body is, whatever its Content-Type says: a
// lenient server may read a text/plain body as JSON, and a request capsem
// did not read could carry a call it would refuse.
func mcpCandidate(r *http.Request, mayDeny bool) bool {
	if mayDeny && hasBody(r) {
		return true // whatever the method: a GET with a body is read too
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	case http.MethodPost:
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		return mt == "application/json" || strings.HasSuffix(mt, "+json")
	}
	return false
}

// hasBody reports whether a request may carry a body.
func hasBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }

// mcpMaxSessionID bounds the Mcp-Session-Id kept in a session key: a
// longer one (the guest's choice, up to the header limit) is kept as its
// hash. The SDKs send UUIDs (36 bytes) or 32 hex digits.
const mcpMaxSessionID = 128

// sessionKey is the tracker's key of a streamable session.
func sessionKey(host, sid string) string {
	if len(sid) > mcpMaxSessionID {
		h := sha256.Sum256([]byte(sid))
		sid = "sha256:" + hex.EncodeToString(h[:])
	}
	return host + "\x00sid\x00" + sid
}

// newView starts the MCP view of an exchange whose request may carry
// MCP. The session is the request's Mcp-Session-Id, or the HTTP+SSE
// endpoint it posts to, or its own.
func (in *Inspector) newView(x inspect.Exchange, r *http.Request, mayDeny bool) *view {
	host := x.Host()
	v := &view{x: x, in: in, t: in.t, pol: x.Policy(), host: host, server: host + r.URL.Path,
		method: r.Method, path: r.URL.Path, mayDeny: mayDeny, claimed: x.Claimed() != ""}
	if r.Method != http.MethodGet && r.Method != http.MethodHead || mayDeny && hasBody(r) {
		v.tap = v.requestParser()
	}
	switch sid := r.Header.Get(mcpSessionHeader); {
	case sid != "":
		v.sess = v.t.session(sessionKey(host, sid))
	default:
		// A POST to an HTTP+SSE endpoint joins the GET stream's session.
		// It takes the session like any exchange: release ends every
		// exchange's use, and a use not taken had the session forgotten
		// after the first POST, every later response unmatched.
		var s *mcpSession
		if r.Method == http.MethodPost {
			s = v.t.existing(endpointKey(host, r.URL.RequestURI()))
		}
		if s != nil {
			v.sess = s
		} else {
			v.own = true
			v.sess = v.t.session(fmt.Sprintf("%s\x00own\x00%p", host, v))
		}
	}
	return v
}

// endpointKey is the session key of an HTTP+SSE endpoint.
func endpointKey(host, uri string) string { return host + "\x00ep\x00" + uri }

// requestParser is the parser of the request body (fed by its tap).
func (v *view) requestParser() io.Writer {
	v.body = mcpscan.NewBody(v.previewBytes(), func(m mcpscan.Message) {
		v.mu.Lock()
		v.rpc = true
		v.mu.Unlock()
		v.fromGuest(m)
	})
	return v.body
}

func (v *view) previewBytes() int { return max(v.pol.PreviewBytes(), 256) }

// fromGuest takes a message the guest sent.
func (v *view) fromGuest(m mcpscan.Message) {
	switch m.Kind {
	case mcpscan.Request, mcpscan.Notification:
	default:
		return // a response to a request of the server's (sampling, roots): recorded with that request's stream
	}
	c := &mcpCall{start: time.Now(), rec: store.MCPCall{
		ServerName:     v.server,
		Method:         m.Method,
		ToolName:       m.Tool,
		RequestID:      m.ID,
		RequestPreview: m.Preview,
		BytesSent:      m.Bytes,
		Decision:       store.Allowed,
		Reason:         policy.ReasonAllowed,
	}}
	pol := v.pol
	if m.Ambiguous && pol.MCPMayDeny(v.host) {
		// What capsem read may not be what the server acts on: a rule
		// that could deny cannot be applied to it.
		c.rec.Decision, c.rec.Reason, c.rec.MatchedRule = store.Denied, policy.ReasonMCPToolDenied, mcpAmbiguousRule
	} else if m.Method == "tools/call" {
		d := pol.DecideMCPTool(v.host, m.Tool)
		c.rec.Reason, c.rec.MatchedRule, c.ask = d.Reason, d.Rule, d.Ask
		if !d.Allowed {
			c.rec.Decision = store.Denied
		}
	}
	if m.Method == "tools/list" && pol.MCPHideDenied() && pol.MCPMayDeny(v.host) {
		c.hideTools = true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if m.Kind == mcpscan.Notification {
		v.notes = append(v.notes, c)
		return
	}
	v.calls = append(v.calls, c)
	if c.rec.Decision == store.Allowed {
		v.t.wait(v.sess, m.ID, c)
	}
}

// fromServer takes a message the server sent, in a response body or on an
// event stream: a response ends its call; a request or notification of the
// server's is a call of its own, recorded as it comes.
func (v *view) fromServer(m mcpscan.Message) {
	switch m.Kind {
	case mcpscan.Response, mcpscan.Error:
		c := v.t.claim(v.sess, m.ID)
		if c == nil {
			return // a response to no request capsem saw (a resumed stream, say)
		}
		c.rec.ResponsePreview = m.Preview
		c.rec.BytesReceived = m.Bytes
		if m.Kind == mcpscan.Error {
			c.rec.ErrorMessage = m.ErrorMessage
		}
		c.rec.Duration = time.Since(c.start)
		v.in.record(c)
	default:
		c := &mcpCall{start: time.Now(), rec: store.MCPCall{
			ServerName:     v.server,
			Method:         m.Method,
			RequestID:      m.ID,
			RequestPreview: m.Preview,
			BytesReceived:  m.Bytes,
			Decision:       store.Allowed,
			Reason:         policy.ReasonAllowed,
		}}
		v.in.record(c)
	}
}

// hidesHere reports whether a tools/list of this exchange's own request
// is answered with tools to filter: all a JSON response can answer.
func (v *view) hidesHere() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.calls {
		if c.hideTools {
			return true
		}
	}
	return false
}

// hiding reports whether a response of this exchange or its session may be
// a tools/list result to filter: a stream of the session (the HTTP+SSE GET
// stream, before it has announced its endpoint, too) carries the results
// of other exchanges' tools/lists.
func (v *view) hiding() bool {
	return v.hidesHere() ||
		v.pol.MCPHideDenied() && v.pol.MCPMayDeny(v.host) && (!v.own || v.method == http.MethodGet)
}

// hide says whether tool must be left out of a tools/list result.
func (v *view) hide(tool string) bool {
	d := v.pol.DecideMCPTool(v.host, tool)
	return !d.Allowed && !d.Ask // a tool a person may allow is listed
}

// filter returns msg (one JSON-RPC message) without the tools the policy
// denies, or nil when it is not a tools/list result or hides nothing.
func (v *view) filter(msg []byte) []byte {
	out, hidden, ok := mcpscan.FilterTools(msg, v.hide)
	if !ok || len(hidden) == 0 {
		return nil
	}
	v.x.Note("tools/list: left out the tools the policy denies ([mcp] hide_denied): " + strings.Join(hidden, ", "))
	return out
}

// Tap is the request body's parser, nil when the body is not read.
func (v *view) Tap() io.Writer { return v.tap }

// Request decides the request's tools/calls before it goes, to a host
// with deny rules (deny.go).
func (v *view) Request(r *http.Request) bool {
	if v.body != nil && v.mayDeny {
		return v.decide(r)
	}
	return true
}

// Response prepares the MCP side of a response: it may replace its body
// (hide_denied) and returns the parser its copy feeds, nil when the
// response carries no MCP (or is a model call's).
func (v *view) Response(resp *http.Response) (io.Writer, error) {
	if v.claimed {
		return nil, nil
	}
	return v.response(resp), nil
}

func (v *view) response(resp *http.Response) io.Writer {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		stream := v.method == http.MethodGet
		var rw *sseRewriter
		// endpoint is the HTTP+SSE transport: a GET stream's session is
		// the endpoint it announces, where the guest reads the responses
		// to its POSTs.
		endpoint := func(uri string) {
			if !stream {
				return
			}
			v.t.release(v.sess)
			v.sess = v.t.session(endpointKey(v.host, resolveEndpoint(v.path, uri)))
			v.own = false
			if rw != nil {
				v.stream = rw
				v.t.setStream(v.sess, rw)
			}
			v.x.Note("MCP HTTP+SSE stream; endpoint " + uri)
		}
		if contentcoding.IsCoded(contentcoding.Of(resp.Header)) {
			// Coded events cannot be cut, rewritten or joined by one of
			// capsem's: the stream goes on as it is, parsed decoded by
			// its tap, and a refusal for its session is answered on the
			// POST instead. Its endpoint is still the session of the
			// POSTs to it (a guest asking for gzip must not make their
			// responses unmatched).
			return mcpscan.NewStream(v.previewBytes(), v.fromServer, endpoint)
		}
		var rewrite func([]byte) []byte
		if v.hiding() {
			rewrite = func(raw []byte) []byte {
				ev, data := mcpscan.EventData(raw)
				if ev != "" && ev != "message" || !bytes.Contains(data, []byte(`"tools"`)) {
					return nil
				}
				if out := v.filter(data); out != nil {
					return mcpscan.FormatEvent(ev, out)
				}
				return nil
			}
		}
		// The stream is cut into events only where capsem may change it:
		// to hide tools, or to inject refusals into a GET stream of a
		// host with deny rules (the HTTP+SSE transport reads them there).
		if rewrite != nil || stream && v.pol.MCPMayDeny(v.host) {
			rw = newSSERewriter(resp.Body, rewrite)
			resp.Body = rw
		}
		return mcpscan.NewStream(v.previewBytes(), v.fromServer, endpoint)
	case "application/json":
		if !v.isRPC() {
			return nil
		}
		if v.hidesHere() {
			v.filterBody(resp)
		}
		return mcpscan.NewBody(v.previewBytes(), v.fromServer)
	}
	return nil
}

func (v *view) isRPC() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rpc
}

// filterBody reads a JSON response whole (up to sseMaxEvent) and leaves
// out the denied tools of a tools/list result. A larger body goes on
// unfiltered: hiding spares the agent a refusal, the refusal itself does
// not depend on it.
func (v *view) filterBody(resp *http.Response) {
	if resp.ContentLength > sseMaxEvent || contentcoding.IsCoded(contentcoding.Of(resp.Header)) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, sseMaxEvent+1))
	rest := resp.Body
	if err != nil || len(body) > sseMaxEvent {
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), rest), rest}
		return
	}
	if out := v.filter(body); out != nil {
		body = out
	}
	resp.Body = readCloser{bytes.NewReader(body), rest}
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
}

type readCloser struct {
	io.Reader
	io.Closer
}

// resolveEndpoint resolves the endpoint URI an HTTP+SSE stream announced
// against the stream's path, keeping path and query only (the host is the
// stream's: capsem decides a POST elsewhere as a request to elsewhere).
func resolveEndpoint(streamPath, uri string) string {
	if i := strings.Index(uri, "://"); i >= 0 {
		uri = uri[i+3:]
		if j := strings.IndexByte(uri, '/'); j >= 0 {
			uri = uri[j:]
		} else {
			uri = "/"
		}
	}
	if !strings.HasPrefix(uri, "/") {
		dir := streamPath[:strings.LastIndexByte(streamPath, '/')+1]
		uri = dir + uri
	}
	return uri
}

// Done records what the exchange leaves: its notifications, and its
// requests no response came for — unless the server accepted them (202)
// to answer on a stream of their session.
func (v *view) Done(o inspect.Outcome) {
	status := o.Status
	v.mu.Lock()
	notes, calls := v.notes, v.calls
	v.notes = nil
	v.mu.Unlock()
	if v.stream != nil {
		v.t.endStream(v.sess, v.stream)
	}
	for _, c := range notes {
		if o.Decision != store.Allowed {
			c.rec.Decision, c.rec.Reason, c.rec.MatchedRule = store.Denied, o.Reason, o.Rule
		}
		c.rec.Duration = time.Since(c.start)
		v.in.record(c)
	}
	if status == http.StatusAccepted && !v.own {
		v.t.release(v.sess)
		return
	}
	ids := make([]string, 0, len(calls))
	for _, c := range calls {
		if c.rec.Decision == store.Allowed {
			ids = append(ids, c.rec.RequestID)
			if o.Decision != store.Allowed {
				// Refused after the MCP decision (the secrets guard, say):
				// it went nowhere.
				c.rec.Decision, c.rec.Reason, c.rec.MatchedRule = store.Denied, o.Reason, o.Rule
			}
		}
	}
	why := "capsem: no response seen"
	if status != 0 && status != http.StatusOK && status != http.StatusAccepted {
		why = fmt.Sprintf("capsem: the server answered HTTP %d", status)
	}
	v.t.drop(v.sess, ids, why)
	v.t.release(v.sess)
}
