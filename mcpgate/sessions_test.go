package mcpgate

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func sessionCount(e *entry) int {
	n := 0
	for range e.srv.Sessions() {
		n++
	}
	return n
}

// Guest sessions are bounded per server: a looping guest cannot hold
// unbounded sessions (goroutines and memory) until the sandbox stops.
func TestSessionCap(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("test", nil))
	ctx := context.Background()
	for i := range maxSessions {
		if code, body := h.post(t, ctx, "test", "", initializeBody); code != http.StatusOK {
			t.Fatalf("initialize %d: %d %s", i, code, body)
		}
	}
	e, _, _ := h.g.lookup("test")
	for _, tc := range []struct {
		name, sid string
		want      int
		why       string
	}{
		{"new session past the cap", "", http.StatusServiceUnavailable, "a POST that would start session 65 is refused, saying what to do"},
		{"existing session", firstSession(e), http.StatusOK, "the cap refuses new sessions only: a live one is still served"},
	} {
		code, body := h.post(t, ctx, "test", tc.sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		if code != tc.want {
			t.Errorf("%s: %d %q, want %d: %s", tc.name, code, body, tc.want, tc.why)
		}
		if code == http.StatusServiceUnavailable && !strings.Contains(body, "DELETE") {
			t.Errorf("%s: body %q does not say how to free a session", tc.name, body)
		}
	}
	if n := sessionCount(e); n != maxSessions {
		t.Errorf("%d live sessions, want %d", n, maxSessions)
	}
	// Ending one frees its slot.
	req, _ := http.NewRequest(http.MethodDelete, h.url+"/test", nil)
	req.Header.Set(sessionIDHeader, firstSession(e))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	if code, body := h.post(t, ctx, "test", "", initializeBody); code != http.StatusOK {
		t.Errorf("initialize after a DELETE: %d %s, want 200: the ended session's slot is free", code, body)
	}
}

func firstSession(e *entry) string {
	for ss := range e.srv.Sessions() {
		return ss.ID()
	}
	return ""
}

// A POST that passed lookup just before Apply removed its server (or Close)
// must not leave a session on the dead entry: Apply closed the sessions it
// saw, not one made after.
func TestSessionOnDeadEntryClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(h *harness)
		dead bool
		why  string
	}{
		{"removed", func(h *harness) { h.g.Apply(nil) }, true, "Apply removed the server while the POST was served"},
		{"closed", func(h *harness) { h.g.Close() }, true, "Close ended the gateway while the POST was served"},
		{"kept", func(h *harness) {}, false, "a live server's new session stays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, decider{}, Config{}, stdioServer("test", nil))
			e, _, _ := h.g.lookup("test")
			if !e.admitSession() {
				t.Fatal("admitSession refused the first session")
			}
			tc.kill(h)
			// The session the POST starts, after Apply or Close closed
			// the sessions they saw.
			st, ct := mcp.NewInMemoryTransports()
			ss, err := e.srv.Connect(context.Background(), st, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ss.Close()
			cc, err := ct.Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			e.endSessionPOST()
			if got := sessionCount(e); (got == 0) != tc.dead {
				t.Errorf("%d sessions left: %s", got, tc.why)
			}
		})
	}
}
