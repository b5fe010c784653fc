package tests

// Smuggling through the MITM. Every place where capsem's MITM stops parsing
// HTTP — a 101 Switching Protocols of any kind, CONNECT (plain, in origin
// form, and extended over HTTP/2 with :protocol), PRI, Expect:
// 100-continue, the fast HTTP/1.1 upstream path and the http.Transport
// fallback, bytes pipelined after an upgrade attempt, header names an
// upstream may read as framing — is tried from the namespace with real
// clients (curl, python3 over ssl for exact bytes) against deliberately lax
// upstreams. Those switch protocols whenever asked (and sometimes when not)
// and keep serving HTTP on the switched connection, so any tunnel the MITM
// let open would carry a request the policy denies to the upstream's /admin/
// handler. Each upstream logs what reached it.

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/capsem/capsem/store"
)

// seenLog is what reached an upstream, one line per request (and per
// chunk of tunnelled data).
type seenLog struct {
	mu    sync.Mutex
	lines []string
}

func (s *seenLog) note(format string, args ...any) {
	s.mu.Lock()
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *seenLog) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

// find returns the lines that contain sub.
func (s *seenLog) find(sub string) []string {
	var out []string
	for _, l := range s.all() {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// laxHandler is an upstream that honours any Upgrade it is sent, the way
// the laxest servers do (an h2c server that does not insist on
// "Connection: HTTP2-Settings", a WebSocket endpoint that does not check
// the key), and after the 101 goes on serving HTTP/1.1 (or HTTP/2 for
// h2c) on the same connection with the full upstream handler, /admin/
// included. /switch and /switch-bare answer 101 to anything, asked or not;
// /ws-wrong-accept answers a WebSocket handshake with a wrong
// Sec-WebSocket-Accept; a WebSocket handshake with a key elsewhere gets a
// real WebSocket server that echoes.
func laxHandler(seen *seenLog) http.Handler {
	mux := upstreamHandler()
	var h http.HandlerFunc
	h = func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for k := range r.Header {
			names = append(names, strings.ToLower(k))
		}
		slices.Sort(names)
		seen.note("%s %s %s headers=%s", r.Method, r.RequestURI, r.Proto, strings.Join(names, ","))
		up := r.Header.Get("Upgrade")
		all := strings.ToLower(strings.Join(r.Header.Values("Upgrade"), ","))
		switch {
		case r.URL.Path == "/switch":
			switchProtocols(w, "Upgrade: foo\r\nConnection: Upgrade\r\n", func(c net.Conn) { serveH1(c, h) })
		case r.URL.Path == "/switch-bare":
			switchProtocols(w, "", func(c net.Conn) { serveH1(c, h) })
		case r.ProtoMajor != 1 || up == "":
			mux.ServeHTTP(w, r)
		case strings.Contains(all, "h2c"):
			r2 := r.Clone(r.Context())
			for _, k := range []string{"Upgrade", "Connection", "Http2-Settings"} {
				r2.Header.Del(k)
			}
			r2.Body = http.NoBody
			switchProtocols(w, "Upgrade: "+up+"\r\nConnection: Upgrade\r\n", func(c net.Conn) {
				(&http2.Server{}).ServeConn(c, &http2.ServeConnOpts{Handler: h, UpgradeRequest: r2})
			})
		case strings.Contains(all, "websocket") && r.Header.Get("Sec-WebSocket-Key") != "":
			accept := wsAccept(r.Header.Get("Sec-WebSocket-Key"))
			serve := func(c net.Conn) { io.Copy(c, c) }
			if r.URL.Path == "/ws-wrong-accept" {
				accept = wsAccept("not the key the client sent")
				serve = func(c net.Conn) { serveH1(c, h) }
			}
			switchProtocols(w, "Upgrade: "+up+"\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+accept+"\r\n", serve)
		default:
			switchProtocols(w, "Upgrade: "+up+"\r\nConnection: Upgrade\r\n", func(c net.Conn) { serveH1(c, h) })
		}
	}
	return h
}

// switchProtocols answers 101 with the given header lines and hands the
// connection (with what the server had buffered) to serve.
func switchProtocols(w http.ResponseWriter, header string, serve func(net.Conn)) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n" + header + "\r\n")
	brw.Flush()
	serve(&bufferedConn{Conn: c, r: brw.Reader})
}

type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// serveH1 serves HTTP/1.1 requests on c with h until c ends.
func serveH1(c net.Conn, h http.Handler) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		io.Copy(io.Discard, req.Body)
		resp := rec.Result()
		resp.ContentLength = int64(rec.Body.Len())
		if err := resp.Write(c); err != nil {
			return
		}
	}
}

// wsAccept is the Sec-WebSocket-Accept that proves a server read key
// (RFC 6455 §4.2.2).
func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// startXConnectUpstream is an HTTP/2 upstream (TLS, ALPN h2) written on
// the frame layer that advertises SETTINGS_ENABLE_CONNECT_PROTOCOL, answers
// every CONNECT (extended or not) with 200 and then echoes the stream's
// data: a tunnel, if the MITM forwarded one. GETs get a short body.
func startXConnectUpstream(t *testing.T, ca *testCA, seen *seenLog, name string) int {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{ca.leaf(t, name)},
		NextProtos:   []string{"h2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveXConnect(c, seen)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func serveXConnect(c net.Conn, seen *seenLog) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingEnableConnectProtocol, Val: 1})
	headers := func(status string, endStream bool, id uint32) {
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: status})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: endStream})
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			var names []string
			for _, hf := range f.RegularFields() {
				names = append(names, hf.Name)
			}
			slices.Sort(names)
			method := f.PseudoValue("method")
			seen.note("%s %s :protocol=%s headers=%s", method, f.PseudoValue("path"), f.PseudoValue("protocol"), strings.Join(names, ","))
			if method == "CONNECT" {
				headers("200", false, f.StreamID)
				continue
			}
			headers("200", false, f.StreamID)
			fr.WriteData(f.StreamID, true, []byte("hello from the h2 upstream"))
		case *http2.DataFrame:
			if n := len(f.Data()); n > 0 {
				seen.note("tunnel data on stream %d: %q", f.StreamID, f.Data())
				fr.WriteWindowUpdate(0, uint32(n))
				fr.WriteWindowUpdate(f.StreamID, uint32(n))
				fr.WriteData(f.StreamID, false, f.Data())
			}
		}
	}
}

// startRawUpstream is an HTTP/1.1 upstream (TLS) with a hand-written,
// lax parser: header names are matched case-insensitively with '_' read as
// '-' (as servers that map headers to CGI-style variables do), and
// Transfer-Encoding wins over Content-Length. Its responses carry headers
// in a fixed, unsorted order.
func startRawUpstream(t *testing.T, ca *testCA, seen *seenLog, name string) int {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{ca.leaf(t, name)},
		NextProtos:   []string{"http/1.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveRaw(c, seen)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// rawResponseHeaders is the order the raw upstream sends its headers in.
var rawResponseHeaders = [][2]string{
	{"Zeta", "last letter, first line"},
	{"Content-Type", "text/plain"},
	{"Alpha", "first letter"},
	{"X-Dup", "1"},
	{"Mid", "m"},
	{"X-Dup", "2"},
}

func serveRaw(c net.Conn, seen *seenLog) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return
		}
		h := map[string]string{}
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			l = strings.TrimRight(l, "\r\n")
			if l == "" {
				break
			}
			k, v, _ := strings.Cut(l, ":")
			h[strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "_", "-")] = strings.TrimSpace(v)
		}
		seen.note("%s %s", f[0], f[1])
		if strings.Contains(strings.ToLower(h["transfer-encoding"]), "chunked") {
			for {
				sz, err := br.ReadString('\n')
				if err != nil {
					return
				}
				n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(sz, ";", 2)[0]), 16, 64)
				if err != nil {
					return
				}
				if n == 0 {
					br.ReadString('\n')
					break
				}
				io.CopyN(io.Discard, br, n+2)
			}
		} else if n, err := strconv.ParseInt(h["content-length"], 10, 64); err == nil {
			io.CopyN(io.Discard, br, n)
		}
		body := "hello from the raw upstream"
		if strings.HasPrefix(f[1], "/admin") {
			body = "the admin page: capsem should never let the guest see this"
		}
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\n")
		for _, kv := range rawResponseHeaders {
			b.WriteString(kv[0] + ": " + kv[1] + "\r\n")
		}
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
		if _, err := io.WriteString(c, b.String()); err != nil {
			return
		}
	}
}

// smuggleEnv is a guest with three lax upstreams behind the MITM: api.test
// (laxHandler, HTTP/1.1 and HTTP/2), xc.test (extended CONNECT over HTTP/2)
// and raw.test (the hand-written HTTP/1.1 server). /admin/* is denied on
// all three.
type smuggleEnv struct {
	*env
	lax, xc, raw *seenLog
}

func startSmuggle(t *testing.T) *smuggleEnv {
	needHarness(t)
	ca := newTestCA(t, "tests upstream CA")
	s := &smuggleEnv{lax: &seenLog{}, xc: &seenLog{}, raw: &seenLog{}}
	lax := startHTTPS(t, ca, laxHandler(s.lax), "api.test")
	xc := startXConnectUpstream(t, ca, s.xc, "xc.test")
	raw := startRawUpstream(t, ca, s.raw, "raw.test")
	s.env = startEnv(t, fmt.Sprintf(`
[network]
default = "deny"
allow = ["api.test:443", "xc.test:443", "raw.test:443"]

[upstream]
resolve = { "api.test" = "127.0.0.1:%d", "xc.test" = "127.0.0.1:%d", "raw.test" = "127.0.0.1:%d" }
ca_files = [%q]

[[http]]
host = "api.test"
paths = ["/admin/*"]
action = "deny"

[[http]]
host = "xc.test"
paths = ["/admin/*"]
action = "deny"

[[http]]
host = "raw.test"
paths = ["/admin/*"]
action = "deny"
`, lax, xc, raw, ca.pemPath), envOptions{})
	return s
}

// h2Python is the guest's HTTP/2, written by hand so that it can send
// what no library would: a client preface, SETTINGS (and a blind ACK of
// the server's), and frames given as JSON [type, flags, stream, payload
// (latin-1), or headers as [[name, value], …] encoded as HPACK literals].
const h2Python = `
def hpack(fields):
    out = b""
    for n, v in fields:
        n, v = n.encode(), v.encode()
        out += b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v
    return out

def frame(typ, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([typ, flags]) + sid.to_bytes(4, "big") + payload

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(4, 1, 0, b"")

def h2_frames(spec):
    out = b""
    for typ, flags, sid, payload in spec:
        if isinstance(payload, list):
            payload = hpack(payload)
        else:
            payload = payload.encode("latin-1")
        out += frame(typ, flags, sid, payload)
    return out

def h2_read(s, secs):
    """Frames received within secs: DATA per stream, RST_STREAM codes, GOAWAY."""
    s.settimeout(0.3)
    buf, end = b"", time.time() + secs
    while time.time() < end:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not d:
            break
        buf += d
    streams, i = {}, 0
    while i + 9 <= len(buf):
        n = int.from_bytes(buf[i:i+3], "big")
        typ, sid = buf[i+3], int.from_bytes(buf[i+5:i+9], "big") & 0x7fffffff
        p = buf[i+9:i+9+n]
        i += 9 + n
        st = streams.setdefault(str(sid), {"data": "", "rst": None, "headers": 0})
        if typ == 0:
            st["data"] += p.decode("latin-1")
        elif typ == 1:
            st["headers"] += 1
        elif typ == 3:
            st["rst"] = int.from_bytes(p[:4], "big")
        elif typ == 7:
            st["goaway"] = int.from_bytes(p[4:8], "big")
    return streams, buf
`

// smugglePython runs HTTP/1.1 cases, one TLS connection each: send
// "send" as is, read one response; then "follow" — into the tunnel if the
// answer was 101 (HTTP/1.1 or HTTP/2 bytes, and whatever comes back within
// 3 s), or as the next request on the connection otherwise. It prints one
// JSON line per case.
const smugglePython = `
import json, os, socket, ssl, sys, time
` + h2Python + `
host, cases = sys.argv[1], json.loads(sys.argv[2])
ADMIN_H1 = ("GET /admin/x HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode()
ADMIN_H2 = H2_PREFACE + frame(1, 5, 3, hpack([(":method", "GET"), (":scheme", "https"), (":path", "/admin/x"), (":authority", host)]))

class Conn:
    def __init__(self):
        ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
        ctx.set_alpn_protocols(["http/1.1"])
        self.s = ctx.wrap_socket(socket.create_connection((host, 443), timeout=10), server_hostname=host)
        self.buf = b""
    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("closed")
        self.buf += d
    def response(self):
        while True:
            while b"\r\n\r\n" not in self.buf:
                self.fill()
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            if status >= 200 or status == 101:
                break
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        body = b""
        if status != 101 and "content-length" in hdrs:
            n = int(hdrs["content-length"])
            while len(self.buf) < n:
                self.fill()
            body, self.buf = self.buf[:n], self.buf[n:]
        elif status != 101 and hdrs.get("transfer-encoding") == "chunked":
            while b"0\r\n\r\n" not in self.buf:
                self.fill()
            body, self.buf = self.buf, b""
        return status, body
    def drain(self, secs):
        self.s.settimeout(0.3)
        end = time.time() + secs
        while time.time() < end:
            try:
                self.fill()
            except socket.timeout:
                continue
            except (EOFError, OSError):
                break
        return self.buf

for c in cases:
    res = {"name": c["name"], "admin": False}
    got = b""
    try:
        conn = Conn()
        conn.s.sendall(c["send"].encode("latin-1"))
        status, body = conn.response()
        res["first"] = status
        got += body
        if status == 101:
            res["tunnel"] = True
            conn.s.sendall(ADMIN_H2 if c["follow"] == "h2" else ADMIN_H1)
            got += conn.drain(3)
        else:
            if not c.get("pipelined"):
                conn.s.sendall(ADMIN_H1)
            try:
                st, b = conn.response()
                res["then"] = st
                got += b
            except (EOFError, OSError) as e:
                res["then"] = "closed"
    except Exception as e:
        res["error"] = repr(e)
    res["admin"] = b"admin page" in got
    print(json.dumps(res), flush=True)
`

// smuggleCase is one connection of smugglePython.
type smuggleCase struct {
	Name      string `json:"name"`
	Send      string `json:"send"`
	Follow    string `json:"follow"` // h1 or h2: what follows into a tunnel
	Pipelined bool   `json:"pipelined,omitempty"`

	why        string
	wantFirst  int    // the status of the first response
	wantDetail string // in the first request's event Detail (found by ?case=Name)
	closes     bool   // the connection ends after the first response (HTTP/1.0)
}

type smuggleResult struct {
	Name   string `json:"name"`
	First  int    `json:"first"`
	Then   any    `json:"then"`
	Tunnel bool   `json:"tunnel"`
	Admin  bool   `json:"admin"`
	Error  string `json:"error"`
}

func (s *smuggleEnv) runCases(t *testing.T, host string, cases []smuggleCase) map[string]smuggleResult {
	t.Helper()
	js, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.runEnv(time.Duration(10+5*len(cases))*time.Second, s.trustEnv(), "python3", "-c", smugglePython, host, string(js))
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	res := map[string]smuggleResult{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r smuggleResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("python printed %q: %v\n%s", line, err, out)
		}
		res[r.Name] = r
	}
	return res
}

// wsHeaders is a valid WebSocket handshake's headers, minus Upgrade.
const wsHeaders = "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"

const h2cSettings = "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"

func get(name, headers string) string {
	return "GET /hello?case=" + name + " HTTP/1.1\r\nHost: api.test\r\n" + headers + "\r\n"
}

// TestSmuggleUpgradeIsNoTunnel: whatever Upgrade a request carries, no
// tunnel opens unless it is a valid WebSocket handshake answered as one,
// and the event says what was stripped.
func TestSmuggleUpgradeIsNoTunnel(t *testing.T) {
	s := startSmuggle(t)
	cases := []smuggleCase{
		{Name: "h2c", Send: get("h2c", "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"+h2cSettings), Follow: "h2",
			why: "RFC 7540 §3.2 h2c upgrade: the upstream would speak HTTP/2 on a connection capsem no longer parses", wantFirst: 200, wantDetail: "h2c"},
		{Name: "h2c-odd-case", Send: get("h2c-odd-case", "connection: upgrade ,\tHTTP2-SETTINGS\r\nupgrade:   H2C  \r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"), Follow: "h2",
			why: "token matching is case-insensitive and ignores optional whitespace, at capsem as at the upstream", wantFirst: 200, wantDetail: "H2C"},
		{Name: "h2c-bare", Send: get("h2c-bare", "Connection: Upgrade\r\nUpgrade: h2c\r\n"+h2cSettings), Follow: "h2",
			why: "a lax h2c server needs no HTTP2-Settings token in Connection", wantFirst: 200, wantDetail: "HTTP2-Settings"},
		{Name: "tls", Send: get("tls", "Connection: Upgrade\r\nUpgrade: TLS/1.2\r\n"), Follow: "h1",
			why: "RFC 2817 upgrade to TLS", wantFirst: 200, wantDetail: "TLS/1.2"},
		{Name: "anything", Send: get("anything", "Connection: Upgrade\r\nUpgrade: capsem-tunnel/1\r\n"), Follow: "h1",
			why: "any token an upstream may honour", wantFirst: 200, wantDetail: "capsem-tunnel/1"},
		{Name: "two-lines", Send: get("two-lines", "Connection: Upgrade\r\nUpgrade: foo\r\nUpgrade: h2c\r\n"), Follow: "h1",
			why: "the reverse proxy forwards only the first Upgrade line; every line counts", wantFirst: 200, wantDetail: "foo"},
		{Name: "ws-no-key", Send: get("ws-no-key", "Connection: Upgrade\r\nUpgrade: websocket\r\n"), Follow: "h1",
			why: "websocket without Sec-WebSocket-Key is no WebSocket handshake; a lax upstream switches anyway", wantFirst: 200, wantDetail: "Sec-WebSocket-Key"},
		{Name: "ws-post", Send: "POST /hello?case=ws-post HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nContent-Length: 0\r\n" + wsHeaders + "\r\n", Follow: "h1",
			why: "a WebSocket handshake is a GET (RFC 6455 §4.1)", wantFirst: 200, wantDetail: "GET"},
		{Name: "http10", Send: "GET /hello?case=http10 HTTP/1.0\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n", Follow: "h1",
			why: "HTTP/1.0 has no Upgrade; Go's server still hands the header over", wantFirst: 200, wantDetail: "foo", closes: true},
		{Name: "token-list", Send: get("token-list", "Upgrade: h2c, websocket\r\n"+wsHeaders), Follow: "h2",
			why: "a list with websocket: only websocket is offered upstream, and the upstream (a real WebSocket server) echoes", wantFirst: 101, wantDetail: "h2c"},
		{Name: "pipelined", Send: get("pipelined", "Connection: Upgrade\r\nUpgrade: foo\r\n") + "GET /admin/x HTTP/1.1\r\nHost: api.test\r\n\r\n", Follow: "h1", Pipelined: true,
			why: "bytes sent right behind the upgrade request are the next request, not tunnel payload", wantFirst: 200, wantDetail: "foo"},
		{Name: "expect-fallback", Send: "POST /upload?case=expect-fallback HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n", Follow: "h1",
			why: "Expect sends the request through http.Transport rather than the fast path", wantFirst: 200, wantDetail: "foo"},
		{Name: "websocket", Send: "GET /ws?case=websocket HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\n" + wsHeaders + "\r\n", Follow: "h1",
			why: "a valid WebSocket handshake still passes", wantFirst: 101, wantDetail: "upgraded to websocket"},
	}
	res := s.runCases(t, "api.test", cases)
	evs := s.stop()
	for _, c := range cases {
		r, ok := res[c.Name]
		if !ok || r.Error != "" {
			t.Errorf("%s: no result (%+v)", c.Name, r)
			continue
		}
		if r.Admin {
			t.Errorf("%s: the guest reached the upstream's /admin/ page (%s): %+v", c.Name, c.why, r)
		}
		if r.First != c.wantFirst {
			t.Errorf("%s: first response %d, want %d (%s)", c.Name, r.First, c.wantFirst, c.why)
		}
		if c.wantFirst != 101 && r.Tunnel {
			t.Errorf("%s: a tunnel opened (%s)", c.Name, c.why)
		}
		if !c.Pipelined && c.wantFirst != 101 && r.Then != float64(403) && !(c.closes && r.Then == "closed") {
			t.Errorf("%s: the request after it got %v, want 403 from capsem", c.Name, r.Then)
		}
		n := netEvent(evs, func(n *store.Net) bool { return n.Query == "case="+c.Name })
		if n == nil || !strings.Contains(n.Detail, c.wantDetail) {
			t.Errorf("%s: event detail does not say %q:\n%+v", c.Name, c.wantDetail, n)
		}
	}
	if seen := s.lax.find("/admin/"); len(seen) > 0 {
		t.Errorf("the upstream served a path the policy denies: %q", seen)
	}
	// The stripped headers never reach the upstream.
	for _, l := range s.lax.find("case=") {
		if strings.Contains(l, "http2-settings") || (strings.Contains(l, "upgrade") && !strings.Contains(l, "case=websocket") && !strings.Contains(l, "case=token-list")) {
			t.Errorf("a stripped header reached the upstream: %s", l)
		}
	}
	if n := netEvent(evs, func(n *store.Net) bool { return n.Path == "/admin/x" && n.Decision == store.Denied }); n == nil {
		t.Errorf("no denied event for the /admin/x that followed:\n%s", dumpEvents(evs))
	}
}

// TestSmuggleUpstreamSwitchUnasked: an upstream that answers 101 to a
// request that was not a permitted WebSocket handshake — or to one, with a
// wrong Sec-WebSocket-Accept — gets no tunnel, on the fast path and the
// fallback alike: the guest gets a 502 and the event says why.
func TestSmuggleUpstreamSwitchUnasked(t *testing.T) {
	s := startSmuggle(t)
	cases := []smuggleCase{
		{Name: "fast", Send: "GET /switch?case=fast HTTP/1.1\r\nHost: api.test\r\n\r\n", Follow: "h1",
			why: "the fast HTTP/1.1 path reads the 101 itself"},
		{Name: "fallback", Send: "POST /switch?case=fallback HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", Follow: "h1",
			why: "http.Transport hands a 101 over with the connection as its body"},
		{Name: "bare", Send: "GET /switch-bare?case=bare HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", Follow: "h1",
			why: "a 101 naming no protocol"},
		{Name: "wrong-accept", Send: "GET /ws-wrong-accept?case=wrong-accept HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\n" + wsHeaders + "\r\n", Follow: "h1",
			why: "a WebSocket answer that does not prove the upstream read the handshake"},
	}
	for i := range cases {
		cases[i].wantFirst = http.StatusBadGateway
	}
	res := s.runCases(t, "api.test", cases)
	evs := s.stop()
	for _, c := range cases {
		r := res[c.Name]
		if r.Error != "" || r.First != c.wantFirst || r.Tunnel || r.Admin {
			t.Errorf("%s (%s): %+v, want a 502 and no tunnel", c.Name, c.why, r)
		}
		n := netEvent(evs, func(n *store.Net) bool { return n.Query == "case="+c.Name })
		if n == nil || n.StatusCode != http.StatusBadGateway || n.Reason != "upstream-upgrade-refused" || n.Decision != store.Denied || !strings.Contains(n.Detail, "101") {
			t.Errorf("%s: want a denied 502 event with reason upstream-upgrade-refused, got %+v", c.Name, n)
		}
	}
	if seen := s.lax.find("/admin/"); len(seen) > 0 {
		t.Errorf("the upstream served a path the policy denies: %q", seen)
	}
}

// TestSmuggleConnectAndPRIAreRefused: CONNECT (authority or origin form)
// and PRI are methods of tunnels and of HTTP/2's preface; the MITM is an
// origin server to the guest and forwards neither.
func TestSmuggleConnectAndPRIAreRefused(t *testing.T) {
	s := startSmuggle(t)
	cases := []smuggleCase{
		{Name: "connect-authority", Send: "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n", Follow: "h1"},
		{Name: "connect-origin", Send: "CONNECT /hello HTTP/1.1\r\nHost: api.test\r\n\r\n", Follow: "h1"},
		{Name: "pri", Send: "PRI * HTTP/2.0\r\nHost: api.test\r\n\r\nSM\r\n\r\n", Follow: "h1", Pipelined: true},
	}
	res := s.runCases(t, "api.test", cases)
	evs := s.stop()
	for _, c := range cases {
		if r := res[c.Name]; r.Error != "" || r.First != http.StatusMethodNotAllowed || r.Tunnel || r.Admin {
			t.Errorf("%s: %+v, want 405 and no tunnel", c.Name, r)
		}
	}
	for _, m := range []string{"CONNECT", "PRI"} {
		if seen := s.lax.find(m + " "); len(seen) > 0 {
			t.Errorf("the upstream got a %s request: %q", m, seen)
		}
		var found int
		for _, ev := range evs {
			if n := ev.Net; n != nil && n.Method == m {
				found++
				if n.Decision != store.Denied || n.Reason != "http-tunnel-refused" || n.StatusCode != http.StatusMethodNotAllowed {
					t.Errorf("%s event: %+v, want denied, http-tunnel-refused, 405", m, n)
				}
			}
		}
		if found == 0 {
			t.Errorf("no %s event:\n%s", m, dumpEvents(evs))
		}
	}
}

// TestSmuggleH2ConnectAndProtocol: over HTTP/2, a CONNECT (plain, or
// extended with :protocol as RFC 8441 WebSockets use it) is refused even
// when the guest-facing HTTP/2 server is built to accept :protocol
// (GODEBUG=http2xconnect=1 in capsem's environment), and an HTTP2-Settings
// header does not reach the upstream.
func TestSmuggleH2ConnectAndProtocol(t *testing.T) {
	needHarness(t)
	t.Setenv("GODEBUG", "http2xconnect=1")
	s := startSmuggle(t)
	frames := [][]any{
		{1, 4, 1, [][2]string{{":method", "CONNECT"}, {":protocol", "websocket"}, {":scheme", "https"}, {":path", "/hello"}, {":authority", "xc.test"}}},
		{0, 0, 1, "GET /admin/x HTTP/1.1\r\nHost: xc.test\r\n\r\n"},
		{1, 4, 3, [][2]string{{":method", "CONNECT"}, {":protocol", "h2c"}, {":scheme", "https"}, {":path", "/hello"}, {":authority", "xc.test"}}},
		{0, 0, 3, "tunnel payload"},
		{1, 4, 5, [][2]string{{":method", "CONNECT"}, {":authority", "xc.test:443"}}},
		{0, 0, 5, "tunnel payload"},
		{1, 5, 7, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", "/hello"}, {":authority", "xc.test"}, {"http2-settings", "AAMAAABkAARAAAAAAAIAAAAA"}}},
	}
	js, _ := json.Marshal(frames)
	prog := `
import json, os, socket, ssl, sys, time
` + h2Python + `
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
ctx.set_alpn_protocols(["h2"])
s = ctx.wrap_socket(socket.create_connection(("xc.test", 443), timeout=10), server_hostname="xc.test")
assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
s.sendall(H2_PREFACE + h2_frames(json.loads(sys.argv[1])))
streams, _ = h2_read(s, 4)
print(json.dumps(streams))
`
	out, err := s.runEnv(40*time.Second, s.trustEnv(), "python3", "-c", prog, string(js))
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var streams map[string]struct {
		Data string `json:"data"`
		Rst  *int   `json:"rst"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &streams); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	evs := s.stop()
	for _, id := range []string{"1", "3", "5"} {
		st := streams[id]
		if strings.Contains(st.Data, "tunnel payload") || strings.Contains(st.Data, "GET /admin/x") {
			t.Errorf("stream %s: the tunnel echoed: %q", id, st.Data)
		}
		if st.Rst == nil && !strings.Contains(st.Data, "capsem blocked this request") {
			t.Errorf("stream %s: neither reset nor refused with a message: %+v", id, st)
		}
	}
	if seen := s.xc.find("CONNECT"); len(seen) > 0 {
		t.Errorf("the upstream got a CONNECT: %q", seen)
	}
	if seen := s.xc.find("tunnel data"); len(seen) > 0 {
		t.Errorf("tunnel data reached the upstream: %q", seen)
	}
	if get := s.xc.find("GET /hello"); len(get) != 1 || strings.Contains(get[0], "http2-settings") {
		t.Errorf("want one GET /hello without http2-settings at the upstream, got %q", get)
	}
	if !strings.Contains(streams["7"].Data, "hello from the h2 upstream") {
		t.Errorf("the GET did not get through: %+v", streams["7"])
	}
	var refused int
	for _, ev := range evs {
		if n := ev.Net; n != nil && n.Method == "CONNECT" {
			refused++
			if n.Decision != store.Denied || n.Reason != "http-tunnel-refused" {
				t.Errorf("CONNECT event: %+v, want denied, http-tunnel-refused", n)
			}
		}
	}
	if refused != 3 {
		t.Errorf("want 3 refused CONNECT events, got %d:\n%s", refused, dumpEvents(evs))
	}
	if n := netEvent(evs, func(n *store.Net) bool { return n.Domain == "xc.test" && n.Method == "GET" }); n == nil || !strings.Contains(n.Detail, "HTTP2-Settings") {
		t.Errorf("the GET's event does not say HTTP2-Settings was stripped: %+v", n)
	}
}

// TestSmuggleFramingHeaderLookalikes: a header whose name an upstream may
// read as a framing header (Transfer_Encoding, as CGI-style servers map
// '_' and '-' alike) would let the body of an allowed request carry a
// second, denied request past the MITM. Such headers are stripped.
func TestSmuggleFramingHeaderLookalikes(t *testing.T) {
	s := startSmuggle(t)
	smuggled := "0\r\n\r\nGET /admin/x HTTP/1.1\r\nHost: raw.test\r\n\r\n"
	cases := []smuggleCase{
		{Name: "transfer_encoding", Send: fmt.Sprintf("POST /hello?case=transfer_encoding HTTP/1.1\r\nHost: raw.test\r\nContent-Length: %d\r\nTransfer_Encoding: chunked\r\n\r\n%s", len(smuggled), smuggled), Follow: "h1"},
		{Name: "te-lookalike-fallback", Send: fmt.Sprintf("POST /hello?case=te-lookalike-fallback HTTP/1.1\r\nHost: raw.test\r\nExpect: 100-continue\r\nContent-Length: %d\r\ntransfer_encoding: chunked\r\n\r\n%s", len(smuggled), smuggled), Follow: "h1"},
	}
	res := s.runCases(t, "raw.test", cases)
	evs := s.stop()
	for _, c := range cases {
		if r := res[c.Name]; r.Error != "" || r.First != 200 || r.Admin {
			t.Errorf("%s: %+v", c.Name, r)
		}
		if n := netEvent(evs, func(n *store.Net) bool { return n.Query == "case="+c.Name }); n == nil || !strings.Contains(n.Detail, "Transfer_encoding") {
			t.Errorf("%s: the event does not say what was stripped: %+v", c.Name, n)
		}
	}
	if seen := s.raw.find("/admin/"); len(seen) > 0 {
		t.Errorf("a request smuggled in a body reached the upstream: %q", seen)
	}
}

// TestSmuggleExpectContinueBodyIsNotARequest guards Expect: 100-continue:
// the body of a refused request (never asked for with a 100) and the body
// of an allowed one are never read as the next request.
func TestSmuggleExpectContinueBodyIsNotARequest(t *testing.T) {
	s := startSmuggle(t)
	inner := "GET /admin/y HTTP/1.1\r\nHost: api.test\r\n\r\n"
	cases := []smuggleCase{
		{Name: "denied", Send: fmt.Sprintf("POST /admin/x?case=denied HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner), Follow: "h1", Pipelined: true},
		{Name: "allowed", Send: fmt.Sprintf("POST /upload?case=allowed HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner), Follow: "h1"},
		{Name: "chunked", Send: fmt.Sprintf("POST /upload?case=chunked HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(inner), inner), Follow: "h1"},
	}
	res := s.runCases(t, "api.test", cases)
	s.stop()
	for _, c := range cases {
		if r := res[c.Name]; r.Error != "" || r.Admin || r.Tunnel {
			t.Errorf("%s: %+v", c.Name, r)
		}
	}
	if res["denied"].First != 403 || res["allowed"].First != 200 || res["chunked"].First != 200 {
		t.Errorf("statuses: %+v", res)
	}
	if seen := s.lax.find("/admin/"); len(seen) > 0 {
		t.Errorf("a request in a body reached the upstream: %q", seen)
	}
}

// TestMITMRecordsHeadersInWireOrder: the schema promises headers in wire
// order; for requests (HTTP/1.1 and HTTP/2) and for responses read on the
// fast HTTP/1.1 upstream path that is what is stored.
func TestMITMRecordsHeadersInWireOrder(t *testing.T) {
	s := startSmuggle(t)
	out, err := s.runEnv(30*time.Second, s.trustEnv(), "curl", "-sS", "--max-time", "20", "--http1.1",
		"-H", "Zeta: 1", "-H", "Alpha: 2", "-H", "Mid: 3", "-H", "X-Dup: a", "https://raw.test/order")
	if err != nil || !strings.Contains(out, "hello from the raw upstream") {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	out, err = s.runEnv(30*time.Second, s.trustEnv(), "curl", "-sS", "--max-time", "20", "--http2",
		"-H", "Zeta: 1", "-H", "Alpha: 2", "-H", "Mid: 3", "-H", "X-Dup: a", "-H", "X-Dup: b", "https://api.test/hello?h2")
	if err != nil || !strings.Contains(out, "via HTTP/2.0") {
		t.Fatalf("curl --http2: %v\n%s", err, out)
	}
	evs := s.stop()
	if n := netEvent(evs, func(n *store.Net) bool { return n.Query == "h2" }); n == nil {
		t.Errorf("no event for the HTTP/2 request:\n%s", dumpEvents(evs))
	} else {
		var got []string
		for _, h := range n.RequestHeaders {
			got = append(got, h.Name)
		}
		if want := []string{"User-Agent", "Accept", "Zeta", "Alpha", "Mid", "X-Dup", "X-Dup"}; !slices.Equal(got, want) {
			t.Errorf("HTTP/2 request headers in order %q, want %q", got, want)
		}
	}
	n := httpEvent(evs, "GET", "/order")
	if n == nil {
		t.Fatalf("no event:\n%s", dumpEvents(evs))
	}
	var req []string
	for _, h := range n.RequestHeaders {
		req = append(req, h.Name)
	}
	// curl sends Host, User-Agent, Accept, then the -H headers in order.
	want := []string{"Host", "User-Agent", "Accept", "Zeta", "Alpha", "Mid", "X-Dup"}
	if !slices.Equal(req, want) {
		t.Errorf("request headers in order %q, want %q", req, want)
	}
	var resp [][2]string
	for _, h := range n.ResponseHeaders {
		resp = append(resp, [2]string{h.Name, h.Value})
	}
	wantResp := append(slices.Clone(rawResponseHeaders), [2]string{"Content-Length", "27"})
	if !slices.Equal(resp, wantResp) {
		t.Errorf("response headers %q, want %q", resp, wantResp)
	}
}
