package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capsem/capsem/mcpgate/testserver"
	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/store"
)

// doctorUpstream is the HTTPS service the doctor's network tests reach as
// doctorHost through capsem's MITM. It runs on loopback with a leaf of a
// throwaway CA of its own, which the doctor's policy trusts (ca_files) —
// the way a public CA is trusted for real upstreams.
type doctorUpstream struct {
	srv       *http.Server
	ln        net.Listener
	port      int
	caFile    string
	workspace string

	asks *doctorAsks // /ask: the ask test's host side

	mu        sync.Mutex
	events    map[store.Kind][]eventJSON // what the session's store recorded, per kind
	published ports.Spec                 // the doctor's published port (setPublished)
}

// eventJSON is a recorded event as the doctor's tests read it (/events):
// the fields they check, by kind.
type eventJSON struct {
	Time      time.Time  `json:"time"`                   // the event's time as recorded (the host's)
	Action    string     `json:"action,omitempty"`       // fs
	Path      string     `json:"path,omitempty"`         // fs
	GuestTime *time.Time `json:"guest_time,omitempty"`   // fs: the guest's claim
	Argv      []string   `json:"argv,omitempty"`         // exec
	QName     string     `json:"qname,omitempty"`        // dns
	Decision  string     `json:"decision,omitempty"`     // dns, net
	Reason    string     `json:"reason,omitempty"`       // dns, net
	Answer    string     `json:"answer,omitempty"`       // dns
	Count     int64      `json:"count,omitempty"`        // dns, net, agent
	Method    string     `json:"method,omitempty"`       // net (requests)
	URLPath   string     `json:"url_path,omitempty"`     // net (requests)
	Status    int        `json:"status,omitempty"`       // net (requests)
	Detail    string     `json:"detail,omitempty"`       // net, agent
	Transport string     `json:"transport,omitempty"`    // net
	ConnType  string     `json:"conn_type,omitempty"`    // net
	Direction string     `json:"direction,omitempty"`    // net
	Port      uint16     `json:"port,omitempty"`         // net
	HTTPVer   string     `json:"http_version,omitempty"` // net (requests)
	State     string     `json:"state,omitempty"`        // agent
	// mcp_call; its decision and reason are Decision and Reason, its
	// JSON-RPC method is Method.
	ServerName   string `json:"server_name,omitempty"`
	ToolName     string `json:"tool_name,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	MatchedRule  string `json:"matched_rule,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// maxDoctorEvents bounds the events kept per kind: the injection tests
// send a burst of DNS queries, and the suite reads only recent ones.
const maxDoctorEvents = 20_000

// maxDoctorBytes caps /bytes.
const maxDoctorBytes = 64 << 20

func startDoctorUpstream(work, workspace string) (*doctorUpstream, error) {
	// A CA of the doctor's own stands in for a public one: the policy
	// trusts it through [upstream] ca_files, as a user's would be.
	upCA, err := ca.LoadOrCreate(filepath.Join(work, "doctor-upstream-ca"))
	if err != nil {
		return nil, fmt.Errorf("doctor upstream CA: %w", err)
	}
	leaf, err := upCA.LeafFor(doctorHost, doctorAsked)
	if err != nil {
		return nil, err
	}
	caFile := upCA.CertPath()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &doctorUpstream{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, caFile: caFile, workspace: workspace, events: map[store.Kind][]eventJSON{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "capsem-doctor-ok")
	})
	mux.HandleFunc("/bytes", u.bytes)
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		// capsem's [[http]] rule must stop the request before it gets here.
		io.WriteString(w, "the doctor's admin page: capsem should have refused this request")
	})
	mux.HandleFunc("/fs-events", u.eventsOf(store.KindFS))
	mux.HandleFunc("/events", u.eventsOf(""))
	mux.HandleFunc("/workspace-stat", u.workspaceStat)
	mux.HandleFunc("/upgrade", upgrade)
	mux.HandleFunc("/workspace-file", u.workspaceFile)
	mux.HandleFunc("/reach", u.reach)
	mux.HandleFunc("/ask", func(w http.ResponseWriter, r *http.Request) { u.asks.serve(w, r) })
	// A remote MCP server behind the doctor's host, in both response forms
	// of streamable HTTP (an event stream, and plain JSON), one test server
	// for both so that its calls tool counts what reached either. The MITM
	// must recognise it by content: nothing in the policy says MCP is here.
	// It runs in this process, on loopback, for any guest (and any local
	// process) to call: the in-process server has no crash tool, which
	// would os.Exit the doctor, and its env tool reads an empty map rather
	// than the user's environment this process holds, whether or not the
	// MITM's [[mcp.rules]] entry refuses env.
	mcpSrv := testserver.NewInProcess(nil)
	for path, jsonResp := range map[string]bool{doctorMCPPath: false, doctorMCPJSONPath: true} {
		mux.Handle(path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, &mcp.StreamableHTTPOptions{
			JSONResponse: jsonResp,
			// The upstream listens on loopback and is reached as
			// doctorHost: the SDK's DNS-rebinding guard answers 403 to
			// every such request.
			DisableLocalhostProtection: true,
		}))
	}
	u.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"h2", "http/1.1"}},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = u.srv.ServeTLS(ln, "", "") }()
	return u, nil
}

func (u *doctorUpstream) Close() error { return u.srv.Close() }

// recordEvent notes an event capsem recorded in the session.
func (u *doctorUpstream) recordEvent(ev store.Event) {
	j := eventJSON{Time: ev.Time}
	var kind store.Kind
	if j.Time.IsZero() {
		j.Time = time.Now() // the writer stamps it the same way
	}
	switch {
	case ev.FS != nil:
		kind = store.KindFS
		j.Action, j.Path = ev.FS.Action, ev.FS.Path
		if !ev.FS.GuestTime.IsZero() {
			g := ev.FS.GuestTime
			j.GuestTime = &g
		}
	case ev.Exec != nil:
		kind = store.KindExec
		j.Argv = ev.Exec.Argv
	case ev.DNS != nil:
		kind = store.KindDNS
		j.QName, j.Decision, j.Reason, j.Answer, j.Count = ev.DNS.QName, string(ev.DNS.Decision), ev.DNS.Reason, ev.DNS.Answer, ev.DNS.Count
	case ev.Net != nil:
		kind = store.KindNet
		j.Decision, j.Reason, j.Count, j.Detail = string(ev.Net.Decision), ev.Net.Reason, ev.Net.Count, ev.Net.Detail
		j.Method, j.URLPath, j.Status = ev.Net.Method, ev.Net.Path, ev.Net.StatusCode
		j.Transport, j.ConnType, j.HTTPVer = string(ev.Net.Transport), string(ev.Net.ConnType), ev.Net.HTTPVersion
		j.Direction, j.Port = string(ev.Net.Direction), ev.Net.Port
	case ev.Agent != nil:
		kind = store.KindAgent
		j.State, j.Count, j.Detail = ev.Agent.State, ev.Agent.Count, ev.Agent.Detail
	case ev.MCPCall != nil:
		kind = store.KindMCPCall
		m := ev.MCPCall
		j.ServerName, j.Method, j.ToolName, j.RequestID = m.ServerName, m.Method, m.ToolName, m.RequestID
		j.Decision, j.Reason, j.MatchedRule, j.ErrorMessage = string(m.Decision), m.Reason, m.MatchedRule, m.ErrorMessage
	default:
		return
	}
	u.mu.Lock()
	if len(u.events[kind]) < maxDoctorEvents {
		u.events[kind] = append(u.events[kind], j)
	}
	u.mu.Unlock()
}

func (u *doctorUpstream) bytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 || n > maxDoctorBytes {
		http.Error(w, fmt.Sprintf("n: want 0..%d", maxDoctorBytes), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	chunk := []byte(strings.Repeat("x", 64<<10))
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		n -= k
	}
}

// eventsOf serves the events of one kind recorded so far (/events?kind=K;
// /fs-events is kind fs).
func (u *doctorUpstream) eventsOf(kind store.Kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k := kind
		if k == "" {
			k = store.Kind(r.URL.Query().Get("kind"))
		}
		u.mu.Lock()
		evs := append([]eventJSON{}, u.events[k]...)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(evs)
	}
}

// workspacePath is the request's ?path=REL made absolute and clean ("/a/b",
// to join to the workspace), or false after answering 400.
func workspacePath(w http.ResponseWriter, r *http.Request) (string, bool) {
	rel := r.URL.Query().Get("path")
	clean := filepath.Clean("/" + rel)
	if rel == "" || clean == "/" {
		http.Error(w, "path: want a file in the workspace", http.StatusBadRequest)
		return "", false
	}
	return clean, true
}

// workspaceStat serves the host's lstat of a workspace path as JSON: what a
// host user would find there (/workspace-stat?path=REL).
func (u *doctorUpstream) workspaceStat(w http.ResponseWriter, r *http.Request) {
	clean, ok := workspacePath(w, r)
	if !ok {
		return
	}
	st, err := os.Lstat(filepath.Join(u.workspace, clean))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	out := struct {
		Mode uint32 `json:"mode"` // st_mode as the host's stat(2) gives it
		UID  uint32 `json:"uid"`
		GID  uint32 `json:"gid"`
	}{}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		out.Mode, out.UID, out.GID = uint32(sys.Mode), sys.Uid, sys.Gid
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// upgrade plays an upstream that switches protocols for any Upgrade it is
// offered (as an h2c server would) and then answers every request line on
// the raw connection with 200 naming it: what a guest would reach if capsem
// let a non-WebSocket upgrade through as a tunnel.
func upgrade(w http.ResponseWriter, r *http.Request) {
	proto := r.Header.Get("Upgrade")
	if proto == "" {
		io.WriteString(w, "no upgrade asked")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot switch protocols over HTTP/2", http.StatusHTTPVersionNotSupported)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", proto)
	rw.Flush()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], "HTTP/") {
			body := "the upstream's tunnel answered " + f[1]
			fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			rw.Flush()
		}
	}
}

// workspaceFile serves a file of the shared workspace as the host sees it.
func (u *doctorUpstream) workspaceFile(w http.ResponseWriter, r *http.Request) {
	clean, ok := workspacePath(w, r)
	if !ok {
		return
	}
	// The guest controls the workspace: a symlink must not lead the host
	// out of it.
	real, err := filepath.EvalSymlinks(filepath.Join(u.workspace, clean))
	root, rerr := filepath.EvalSymlinks(u.workspace)
	if err == nil && (rerr != nil || !strings.HasPrefix(real, root+string(filepath.Separator))) {
		http.Error(w, "path leaves the workspace", http.StatusForbidden)
		return
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(real)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

// setPublished notes the host port the doctor's published guest port got.
func (u *doctorUpstream) setPublished(sp ports.Spec) {
	u.mu.Lock()
	u.published = sp
	u.mu.Unlock()
}

// reach (/reach?guest_port=N) tries, from the host, to reach the guest's
// port N: through its published host port when it is the published one,
// else every way a host process could try without one — the same port
// number on the host's loopback and the guest's own address. It reads a
// line, which the guest's server writes on accepting, and answers
// "reached LINE" or "unreachable: why".
func (u *doctorUpstream) reach(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseUint(r.URL.Query().Get("guest_port"), 10, 16)
	if err != nil || n == 0 {
		http.Error(w, "want ?guest_port=N", http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	pub := u.published
	u.mu.Unlock()
	var addrs []string
	if pub.GuestPort == uint16(n) {
		addrs = []string{pub.HostAddr().String()}
	} else {
		addrs = []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(int(n))), net.JoinHostPort(netstack.GuestIP.String(), strconv.Itoa(int(n)))}
	}
	var why []string
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			why = append(why, a+": "+err.Error())
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			why = append(why, a+": connected, but no line: "+err.Error())
			continue
		}
		fmt.Fprintf(w, "reached %s", strings.TrimSpace(line))
		return
	}
	fmt.Fprintf(w, "unreachable: %s", strings.Join(why, "; "))
}
