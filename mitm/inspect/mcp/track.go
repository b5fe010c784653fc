package mcp

import (
	"sync"
	"time"

	"github.com/capsem/capsem/store"
)

// MCP's HTTP transports may answer a request outside the exchange that
// carried it: the older HTTP+SSE transport answers every POST with 202 and
// sends the response on the GET stream that announced the POST's endpoint,
// and the streamable transport may resume a response on a GET stream of
// the same Mcp-Session-Id. The tracker keeps the requests still waiting for
// a response per session, so that a response on any stream of the session
// finds its request and the call is recorded once, with both.
//
// A session is keyed by host and Mcp-Session-Id, or by host and the
// endpoint URI an HTTP+SSE stream announced; an exchange with neither has
// a session of its own.

const (
	// mcpMaxSessions bounds the sessions tracked; the least recently used
	// goes first, its waiting requests recorded without a response.
	mcpMaxSessions = 1024
	// mcpMaxPending bounds the requests waiting in one session.
	mcpMaxPending = 1024
	// mcpMaxPendingAll bounds the requests waiting in all sessions: each
	// holds up to two previews (the policy's preview_bytes), so a guest
	// answering its own requests with 202 from a server of its own cannot
	// make the host hold more than this many.
	mcpMaxPendingAll = 8192
	// mcpWait is how long a request waits for its response before it is
	// recorded without one. A tools/call may run long (a build, a crawl),
	// so it is generous.
	mcpWait = 10 * time.Minute
)

// mcpCall is one MCP request (or notification) and, once it arrives, its
// response.
type mcpCall struct {
	rec   store.MCPCall
	start time.Time
	// hideTools: the call is a tools/list whose result has tools the
	// policy denies; a response carrying it is filtered (hide_denied).
	hideTools bool
	// ask: the policy left the call to a person ([mcp] unknown = "ask");
	// it is asked before the body goes (deny.go).
	ask bool
}

type mcpSession struct {
	key     string
	pending map[string]*mcpCall // by JSON-RPC id
	refs    int                 // the exchanges using it (session, release)
	used    time.Time
	// stream is the HTTP+SSE GET stream that announced this session's
	// endpoint, while it is open: refusals are sent on it.
	stream *sseRewriter
}

type mcpTracker struct {
	mu       sync.Mutex
	sessions map[string]*mcpSession
	pending  int            // requests waiting in all sessions
	record   func(*mcpCall) // records a call (without the lock held)
}

func newMCPTracker(record func(*mcpCall)) *mcpTracker {
	return &mcpTracker{sessions: make(map[string]*mcpSession), record: record}
}

// session returns the session of key, creating it, for an exchange that
// releases it when it ends.
func (t *mcpTracker) session(key string) *mcpSession {
	var expired []*mcpCall
	t.mu.Lock()
	s := t.sessions[key]
	if s == nil {
		if len(t.sessions) >= mcpMaxSessions {
			expired = t.evictOldestLocked()
		}
		s = &mcpSession{key: key, pending: make(map[string]*mcpCall)}
		t.sessions[key] = s
	}
	s.refs++
	s.used = time.Now()
	t.mu.Unlock()
	t.recordLost(expired, "capsem: the session was forgotten (too many MCP sessions open) before a response came")
	return s
}

func (t *mcpTracker) evictOldestLocked() []*mcpCall {
	var oldest *mcpSession
	for _, s := range t.sessions {
		if oldest == nil || s.used.Before(oldest.used) {
			oldest = s
		}
	}
	if oldest == nil {
		return nil
	}
	delete(t.sessions, oldest.key)
	out := make([]*mcpCall, 0, len(oldest.pending))
	for _, c := range oldest.pending {
		out = append(out, c)
	}
	t.pending -= len(oldest.pending)
	oldest.pending = make(map[string]*mcpCall) // recorded as lost: a late response finds nothing
	return out
}

// wait registers a request that expects a response in session s. A request
// reusing a waiting id replaces it: the older is recorded without a
// response.
func (t *mcpTracker) wait(s *mcpSession, id string, c *mcpCall) {
	var lost []*mcpCall
	now := time.Now()
	t.mu.Lock()
	if old := s.pending[id]; old != nil {
		lost = append(lost, old)
		delete(s.pending, id)
		t.pending--
	}
	for k, p := range s.pending {
		if now.Sub(p.start) > mcpWait || len(s.pending) >= mcpMaxPending {
			lost = append(lost, p)
			delete(s.pending, k)
			t.pending--
		}
	}
	for t.pending >= mcpMaxPendingAll && len(t.sessions) > 0 {
		lost = append(lost, t.evictOldestLocked()...)
	}
	if t.sessions[s.key] != s {
		// Evicted just now (it was the oldest): it keeps waiting alone.
		t.sessions[s.key] = s
		t.pending += len(s.pending)
	}
	s.pending[id] = c
	t.pending++
	s.used = now
	t.mu.Unlock()
	t.recordLost(lost, "capsem: no response seen")
}

// claimIf takes c from session s if it is what waits there under id (a
// refused request must not take another exchange's waiting request of the
// same id).
func (t *mcpTracker) claimIf(s *mcpSession, id string, c *mcpCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.pending[id] == c {
		delete(s.pending, id)
		t.pending--
	}
}

// claim takes the request id waits for in session s, if one does.
func (t *mcpTracker) claim(s *mcpSession, id string) *mcpCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := s.pending[id]
	if c != nil {
		delete(s.pending, id)
		t.pending--
		s.used = time.Now()
	}
	return c
}

// drop records the calls of ids still waiting in s without a response:
// their exchange ended, and no other stream can answer them.
func (t *mcpTracker) drop(s *mcpSession, ids []string, why string) {
	var lost []*mcpCall
	t.mu.Lock()
	for _, id := range ids {
		if c := s.pending[id]; c != nil {
			lost = append(lost, c)
			delete(s.pending, id)
			t.pending--
		}
	}
	t.mu.Unlock()
	t.recordLost(lost, why)
}

// setStream makes r the stream refusals of session s are sent on (nil:
// the stream ended).
func (t *mcpTracker) setStream(s *mcpSession, r *sseRewriter) {
	t.mu.Lock()
	s.stream = r
	t.mu.Unlock()
}

// endStream forgets r as the stream of session s, if it still is.
func (t *mcpTracker) endStream(s *mcpSession, r *sseRewriter) {
	t.mu.Lock()
	if s.stream == r {
		s.stream = nil
	}
	t.mu.Unlock()
}

// streamOf returns the open stream of session s, or nil.
func (t *mcpTracker) streamOf(s *mcpSession) *sseRewriter {
	t.mu.Lock()
	defer t.mu.Unlock()
	return s.stream
}

// release ends an exchange's use of session s, and forgets s when no
// exchange uses it, nothing waits in it and no stream is open on it: a
// session is kept only while it can still match a response, so the keys
// guests choose (Mcp-Session-Id) do not pile up.
func (t *mcpTracker) release(s *mcpSession) {
	t.mu.Lock()
	s.refs--
	if s.refs <= 0 && len(s.pending) == 0 && s.stream == nil && t.sessions[s.key] == s {
		delete(t.sessions, s.key)
	}
	t.mu.Unlock()
}

// existing returns the session of key, taken for an exchange (release
// ends it) as session does, if it exists; it makes none.
func (t *mcpTracker) existing(key string) *mcpSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[key]
	if s != nil {
		s.refs++
		s.used = time.Now()
	}
	return s
}

// close records every call still waiting: the proxy is stopping.
func (t *mcpTracker) close() {
	var lost []*mcpCall
	t.mu.Lock()
	for k, s := range t.sessions {
		for _, c := range s.pending {
			lost = append(lost, c)
		}
		delete(t.sessions, k)
	}
	t.pending = 0
	t.mu.Unlock()
	t.recordLost(lost, "capsem: the session ended before a response came")
}

func (t *mcpTracker) recordLost(calls []*mcpCall, why string) {
	for _, c := range calls {
		if c.rec.ErrorMessage == "" {
			c.rec.ErrorMessage = why
		}
		c.rec.Duration = time.Since(c.start)
		t.record(c)
	}
}
