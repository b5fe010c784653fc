package mcpgate

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsem/capsem/mcpgate/testserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// remoteServer is testserver served over streamable HTTP with TLS; it
// counts the requests that carried the Authorization header.
func remoteServer(t *testing.T) (*httptest.Server, *mcp.Server, *atomic.Int64) {
	srv := testserver.New()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var authed atomic.Int64
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer s3cret" {
			authed.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, srv, &authed
}

func TestRemoteServer(t *testing.T) {
	ts, srv, authed := remoteServer(t)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	var dialed atomic.Int64
	cfg := Config{Roots: func() (*x509.CertPool, error) { return roots, nil }}
	cfg.DialContext = func(ctx context.Context, network, addr string) (c netConn, err error) {
		dialed.Add(1)
		return dialer.DialContext(ctx, network, addr)
	}
	h := newHarness(t, decider{deny: map[string]bool{"env": true}}, cfg,
		Server{Name: "remote", URL: ts.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}})

	changed := make(chan struct{}, 1)
	cs := h.connect(t, "remote", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	if got, err := callText(t, cs, "echo", map[string]any{"text": "far"}); err != nil || got != "far" {
		t.Fatalf("echo through the remote = %q, %v", got, err)
	}
	if _, err := callText(t, cs, "env", map[string]any{"name": "HOME"}); err == nil || !strings.HasPrefix(strings.TrimPrefix(err.Error(), `calling "tools/call": `), "capsem:") {
		t.Errorf("denied env on the remote: %v, want capsem's refusal", err)
	}
	if authed.Load() == 0 {
		t.Error("the configured Authorization header never reached the remote server")
	}
	if dialed.Load() == 0 {
		t.Error("the remote was not reached through Config.DialContext")
	}

	// A tools list_changed of the remote reaches the guest.
	mcp.AddTool(srv, &mcp.Tool{Name: "late"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil, nil
	})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools list_changed reached the guest")
	}
	if names := toolNames(t, cs); !slices.Contains(names, "late") {
		t.Errorf("tools after the change = %v, want late", names)
	}
	if len(h.rec.calls("notifications/tools/list_changed")) == 0 {
		t.Error("the forwarded list_changed was not recorded")
	}
}

func TestRemoteUnverifiedRefused(t *testing.T) {
	ts, _, _ := remoteServer(t)
	// No Roots: the system roots, which do not know httptest's CA.
	h := newHarness(t, decider{}, Config{}, Server{Name: "remote", URL: ts.URL + "/mcp"})
	req, _ := http.NewRequest(http.MethodPost, h.url+"/remote", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"g","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ev := h.rec.calls("initialize")
	if len(ev) != 1 || !strings.Contains(ev[0].ErrorMessage, "certificate") || ev[0].RequestID != "1" {
		b, _ := json.Marshal(ev)
		t.Errorf("initialize against an unverifiable remote: events %s, want a certificate error", b)
	}
}

type netConn = net.Conn

var dialer net.Dialer

// A remote server's redirect is not followed: its target is a connection
// the policy did not configure, and the server's credentials must not reach
// it.
func TestRemoteRedirectRefused(t *testing.T) {
	var reached atomic.Int64
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(other.Close)
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	roots := x509.NewCertPool()
	roots.AddCert(redirector.Certificate())
	roots.AddCert(other.Certificate())
	h := newHarness(t, decider{}, Config{Roots: func() (*x509.CertPool, error) { return roots, nil }},
		Server{Name: "remote", URL: redirector.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	h.post(t, context.Background(), "remote", "", initializeBody)
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests, want none", n)
	}
	ev := h.rec.calls("initialize")
	if len(ev) != 1 || !strings.Contains(ev[0].ErrorMessage, "redirected to") {
		t.Errorf("initialize events %+v, want one whose error says the server redirected", ev)
	}
}

type seenHeaders struct{ got http.Header }

func (s *seenHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	s.got = r.Header.Clone()
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

func TestHeaderTransportHost(t *testing.T) {
	for _, tc := range []struct {
		url, want, why string
	}{
		{"https://mcp.example.com/mcp", "Bearer s3cret", "the configured host gets the configured headers"},
		{"https://mcp.example.com/other", "Bearer s3cret", "any path of it"},
		{"https://evil.example.net/mcp", "", "another host never gets them"},
		{"https://mcp.example.com:8443/mcp", "", "nor another port of the host"},
	} {
		seen := &seenHeaders{}
		ht := headerTransport{base: seen, host: "mcp.example.com", headers: map[string]string{"Authorization": "Bearer s3cret"}}
		req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
		if _, err := ht.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if got := seen.got.Get("Authorization"); got != tc.want {
			t.Errorf("%s: Authorization %q, want %q: %s", tc.url, got, tc.want, tc.why)
		}
	}
}

// A remote server that fails mid-session: the guest's error names the
// server, never its URL, whose path or query may hold a token that the
// call's error would otherwise carry to the guest; the host's record
// keeps all of it.
func TestRemoteURLStaysOnTheHost(t *testing.T) {
	ts, _, _ := remoteServer(t)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	const token = "tok-0123456789abcdef"
	h := newHarness(t, decider{}, Config{Roots: func() (*x509.CertPool, error) { return roots, nil }},
		Server{Name: "remote", URL: ts.URL + "/mcp/" + token + "?key=" + token})
	cs := h.connect(t, "remote", nil)
	if got, err := callText(t, cs, "echo", map[string]any{"text": "up"}); err != nil || got != "up" {
		t.Fatalf("echo before the server goes away = %q, %v", got, err)
	}
	ts.CloseClientConnections()
	ts.Close()
	// The first call after the loss fails in the transport; those after
	// it get the session's failure, which the SDK words with the URL.
	var errs []string
	for i := range 3 {
		_, err := callText(t, cs, "echo", map[string]any{"text": fmt.Sprint("down ", i)})
		if err == nil {
			t.Fatal("a call to a server that is gone succeeded")
		}
		errs = append(errs, err.Error())
		if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), strings.TrimPrefix(ts.URL, "https://")) {
			t.Errorf("the guest's error holds the server's URL: %v", err)
		}
	}
	t.Logf("the guest's errors: %q", errs)
	var recorded []string
	for _, c := range h.rec.calls("tools/call") {
		recorded = append(recorded, c.ErrorMessage)
	}
	if !slices.ContainsFunc(recorded, func(s string) bool { return strings.Contains(s, token) }) {
		t.Errorf("the host's record of the failed calls should keep the whole error, URL included: %q", recorded)
	}
}

// TestWireErrorLeavesURLsOut: whatever error a call ends in, the guest's
// JSON-RPC error holds no URL — the SDK words a lost session with the
// request that failed (`Get "https://…?key=…": dial tcp …`).
func TestWireErrorLeavesURLsOut(t *testing.T) {
	for _, c := range []struct {
		err error
		why string
	}{
		{fmt.Errorf("standalone SSE request failed (session ID: s1): %w", &url.Error{Op: "Get", URL: "https://mcp.example.com/mcp/tok-123?key=tok-123", Err: errors.New("dial tcp: connection refused")}), "the SDK's lost session"},
		{fmt.Errorf("mcpgate: MCP server %q: %v", "docs", "failed to reconnect: Post \"https://u:tok-123@mcp.example.com/x\": EOF"), "a URL with credentials"},
		{errors.New("sending \"tools/call\": HTTPS://MCP.EXAMPLE.COM/tok-123 unreachable"), "upper case"},
	} {
		if got := wireError(c.err).Message; strings.Contains(got, "tok-123") || strings.Contains(strings.ToLower(got), "mcp.example.com") {
			t.Errorf("%s: the guest gets %q", c.why, got)
		}
	}
	if got := wireError(errors.New("plain failure")).Message; got != "plain failure" {
		t.Errorf("an error without a URL changed: %q", got)
	}
}
