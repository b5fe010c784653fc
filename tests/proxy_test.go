package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/h3get"
	"github.com/capsem/capsem/store"
)

// squid is a real Squid (Debian's squid package) on loopback: the
// corporate proxy [upstream] proxy names.
type squid struct {
	port      int
	accessLog string
}

// squidAccess is how a squid answers: "open" tunnels for anyone, "auth"
// for alice:s3cret only, "refuse" for nobody.
func startSquid(t *testing.T, access string) *squid {
	t.Helper()
	bin, err := exec.LookPath("squid")
	if err != nil {
		t.Skip("needs squid (Debian squid; go tool task deps installs it)")
	}
	// squid, started as root, works as the user proxy: its directory must
	// be one that user reaches (t.TempDir's parent is root's alone) and
	// writes.
	dir, err := os.MkdirTemp("", "capsem-squid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// The names the guest uses are known to the proxy alone: capsem's host
	// cannot resolve them, so a connection that works went through it.
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 api.corp.test echo.corp.test mcp.corp.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sq := &squid{port: port, accessLog: filepath.Join(dir, "access.log")}
	conf := fmt.Sprintf(`http_port 127.0.0.1:%d
pid_filename %s/squid.pid
cache deny all
access_log stdio:%s
cache_log %s/cache.log
cache_store_log none
coredump_dir %s
netdb_filename none
hosts_file %s
shutdown_lifetime 0 seconds
`, port, dir, sq.accessLog, dir, dir, hosts)
	switch access {
	case "open":
		conf += "http_access allow localhost\nhttp_access deny all\n"
	case "auth":
		passwd := filepath.Join(dir, "passwd")
		if out, err := exec.Command("htpasswd", "-bc", passwd, "alice", "s3cret").CombinedOutput(); err != nil {
			t.Fatalf("htpasswd: %v\n%s", err, out)
		}
		os.Chmod(passwd, 0o644)
		conf += fmt.Sprintf("auth_param basic program /usr/lib/squid/basic_ncsa_auth %s\nauth_param basic realm capsem-test\nacl authed proxy_auth REQUIRED\nhttp_access allow authed\nhttp_access deny all\n", passwd)
	case "refuse":
		conf += "http_access deny all\n"
	}
	confPath := filepath.Join(dir, "squid.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", confPath, "-N")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	if err := waitListening(port, 20*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "cache.log"))
		t.Fatalf("squid: %v\n%s\n%s", err, out.String(), log)
	}
	return sq
}

// log is squid's access log, a line per tunnel, once it holds every one
// of want (or after 5 s): squid writes a tunnel's line when it closes, so
// read it after capsem-net has stopped.
func (s *squid) log(t *testing.T, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(s.accessLog)
		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(string(b), w)
		}
		if !missing || time.Now().After(deadline) {
			return string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxyEnv is the namespace harness with capsem-net's upstream through sq.
type proxyEnv struct {
	*env
	sq       *squid
	api      int // the HTTPS upstream, reached as api.corp.test (through the proxy) and direct.test (not)
	echoPort int
}

func startProxyEnv(t *testing.T, access, extra string) *proxyEnv {
	needHarness(t)
	upCA := newTestCA(t, "tests upstream CA")
	p := &proxyEnv{sq: startSquid(t, access)}
	p.api = startHTTPS(t, upCA, upstreamHandler(), "api.corp.test", "direct.test")
	p.echoPort = newEchoServer(t).port()
	pol := fmt.Sprintf(`
[network]
default = "deny"
allow = ["api.corp.test", "echo.corp.test:%[2]d", "direct.test"]

[upstream]
proxy = "http://127.0.0.1:%[3]d"
no_proxy = ["direct.test"]
# The MITM's port 443 to the test server's: the proxy is asked for the
# name, with the port.
resolve = { "api.corp.test" = "api.corp.test:%[1]d", "direct.test" = "127.0.0.1:%[1]d" }
ca_files = [%[4]q]
%[5]s
`, p.api, p.echoPort, p.sq.port, upCA.pemPath, extra)
	p.env = startEnv(t, pol, envOptions{})
	return p
}

// echoBackThenClose sends n random bytes to host:port and reads n back
// before it closes: the sha256 sent, the sha256 received, the bytes
// received.
const echoBackThenClose = `
import hashlib, os, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = os.urandom(n)
s = socket.create_connection((host, port), timeout=30)
s.sendall(data)
got = bytearray()
while len(got) < n:
    b = s.recv(1 << 16)
    if not b:
        break
    got.extend(b)
s.close()
print(hashlib.sha256(data).hexdigest(), hashlib.sha256(got).hexdigest(), len(got))
`

const proxySecretPolicy = `proxy_secret = "CORP_PROXY"

[[secret]]
name = "CORP_PROXY"
from_env = "CORP_PROXY"
`

// TestProxyOpen: with [upstream] proxy, a MITM'd HTTPS request and a
// passthrough TCP flow reach names only the proxy can resolve, by CONNECT
// with the name; a name in no_proxy goes direct.
func TestProxyOpen(t *testing.T) {
	p := startProxyEnv(t, "open", "")
	out, err := p.runEnv(60*time.Second, p.trustEnv(), "curl", "-sS", "--max-time", "20", "https://api.corp.test/hello")
	if err != nil || !strings.Contains(out, "hello from api.corp.test") {
		t.Fatalf("curl through the proxy: %v\n%s", err, out)
	}
	// A tunnel through squid ends when either side shuts its sending half
	// (squid does not carry a half-close): read the echo back, then close.
	out, err = p.python(60*time.Second, echoBackThenClose, "echo.corp.test", fmt.Sprint(p.echoPort), "10000")
	if f := strings.Fields(out); err != nil || len(f) != 3 || f[0] != f[1] || f[2] != "10000" {
		t.Fatalf("passthrough round trip through the proxy: %v\n%s", err, out)
	}
	out, err = p.runEnv(60*time.Second, p.trustEnv(), "curl", "-sS", "--max-time", "20", "https://direct.test/hello")
	if err != nil || !strings.Contains(out, "hello from direct.test") {
		t.Fatalf("curl to a no_proxy name: %v\n%s", err, out)
	}
	evs := p.stop()
	tunnels := []string{fmt.Sprintf("TCP_TUNNEL/200 %%d CONNECT api.corp.test:%d ", p.api), fmt.Sprintf("TCP_TUNNEL/200 %%d CONNECT echo.corp.test:%d ", p.echoPort)}
	log := p.sq.log(t, fmt.Sprintf("CONNECT api.corp.test:%d", p.api), fmt.Sprintf("CONNECT echo.corp.test:%d", p.echoPort))
	for _, want := range tunnels {
		if !regexp.MustCompile(strings.ReplaceAll(regexp.QuoteMeta(want), "%d", `\d+`)).MatchString(log) {
			t.Errorf("squid's log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "direct.test") {
		t.Errorf("a no_proxy name went through the proxy:\n%s", log)
	}
	via := fmt.Sprintf("upstream via the proxy 127.0.0.1:%d", p.sq.port)
	for _, name := range []string{"api.corp.test", "echo.corp.test"} {
		if n := netEvent(evs, func(n *store.Net) bool {
			return n.Domain == name && n.Decision == store.Allowed && strings.HasPrefix(n.Detail, via)
		}); n == nil {
			t.Errorf("no allowed flow to %s recorded %q:\n%s", name, via, dumpEvents(evs))
		}
	}
}

// TestProxyAuth: the proxy's credentials come from a [[secret]] on the
// host; wrong ones, and a proxy that refuses everyone, fail the flow with
// upstream-proxy-refused naming what the proxy answered.
func TestProxyAuth(t *testing.T) {
	for _, c := range []struct {
		why, access, creds, extra string
		ok                        bool
		detail                    string
	}{
		{"the right credentials, from the secret", "auth", "alice:s3cret", proxySecretPolicy, true, ""},
		{"wrong credentials", "auth", "alice:wrong-password", proxySecretPolicy, false, "407 Proxy Authentication Required: it did not accept the credentials of [upstream] proxy_secret"},
		{"no credentials where the proxy wants them", "auth", "", "", false, "407 Proxy Authentication Required: it wants credentials; set [upstream] proxy_secret"},
		{"a proxy that refuses", "refuse", "", "", false, "403 Forbidden"},
	} {
		t.Run(c.access+"/"+strings.ReplaceAll(c.why, " ", "_"), func(t *testing.T) {
			if c.creds != "" {
				t.Setenv("CORP_PROXY", c.creds)
			}
			p := startProxyEnv(t, c.access, c.extra)
			out, err := p.runEnv(60*time.Second, p.trustEnv(), "curl", "-sS", "--max-time", "20", "https://api.corp.test/hello")
			if got := err == nil && strings.Contains(out, "hello from api.corp.test"); got != c.ok {
				t.Fatalf("%s: curl ok=%v, want %v: %v\n%s", c.why, got, c.ok, err, out)
			}
			evs := p.stop()
			if c.ok {
				log := p.sq.log(t, "TCP_TUNNEL/200")
				if !strings.Contains(log, "TCP_TUNNEL/200") || !strings.Contains(log, " alice ") {
					t.Errorf("%s: squid did not tunnel for alice:\n%s", c.why, log)
				}
				return
			}
			if n := netEvent(evs, func(n *store.Net) bool {
				return n.Domain == "api.corp.test" && n.Decision == store.Denied && n.Reason == "upstream-proxy-refused" && strings.Contains(n.Detail, c.detail)
			}); n == nil {
				t.Errorf("%s: no upstream-proxy-refused flow saying %q:\n%s", c.why, c.detail, dumpEvents(evs))
			}
		})
	}
}

// TestProxyHTTP3: while a proxy is set, a guest's HTTP/3 request is
// answered by capsem over QUIC and goes upstream over TCP through the
// proxy, though the upstream speaks HTTP/3.
func TestProxyHTTP3(t *testing.T) {
	needHarness(t)
	sq := startSquid(t, "open")
	ca := newTestCA(t, "tests upstream CA")
	up := startH3Upstream(t, ca, true, "h3.test")
	e := startEnv(t, fmt.Sprintf(`
[network]
default = "deny"
allow = ["h3.test"]

[upstream]
proxy = "http://127.0.0.1:%d"
resolve = { "h3.test" = "127.0.0.1:%d" }
ca_files = [%q]
`, sq.port, up.port, ca.pemPath), envOptions{})
	r := e.h3Get(h3get.Request{URL: "https://h3.test/via-proxy", Mark: "proxied"})
	if r.Status != 200 || r.Proto != "HTTP/3.0" || !strings.Contains(r.Body, "upstream-saw proto=HTTP/2.0 path=/via-proxy") {
		t.Errorf("the guest's HTTP/3 request: %+v; want it answered over HTTP/3 and sent upstream over HTTP/2", r)
	}
	if got := up.saw("/via-proxy"); len(got) != 1 || got[0] != "HTTP/2.0" {
		t.Errorf("the upstream saw %v, want one HTTP/2.0 request (TCP, through the proxy)", got)
	}
	e.stop()
	want := fmt.Sprintf("CONNECT 127.0.0.1:%d", up.port)
	if log := sq.log(t, want); !strings.Contains(log, want) {
		t.Errorf("squid's log lacks %q:\n%s", want, log)
	}
}

// TestProxyMCPRemote: the MCP gateway's remote server ([mcp.servers] url)
// is reached through the proxy too, by name, though the host cannot
// resolve it.
func TestProxyMCPRemote(t *testing.T) {
	modules := mcpNodeModules(t)
	sq := startSquid(t, "open")
	ca := newTestCA(t, "tests upstream CA")
	port, up := mcpFront(t, ca, startNode(t, modules, mcpEverything(modules), "streamableHttp"), "mcp.corp.test")
	e := startEnv(t, fmt.Sprintf(`
[network]
allow = []

[upstream]
proxy = "http://127.0.0.1:%d"
ca_files = [%q]

[mcp.servers.remote]
url = "https://mcp.corp.test:%d/mcp"
`, sq.port, ca.pemPath, port), envOptions{})
	got := e.mcpClient(modules, "https://mcp.capsem.internal/remote", "streamable",
		mcpStep{Op: "call", Name: "echo", Args: map[string]any{"message": "through-the-proxy"}})
	if len(got) != 1 || !got[0].OK || got[0].Text != "Echo: through-the-proxy" {
		t.Fatalf("echo through the gateway's remote server: %+v", got)
	}
	if calls := up.posts("through-the-proxy"); len(calls) != 1 {
		t.Errorf("the remote MCP server got %d echo calls, want 1", len(calls))
	}
	e.stop()
	want := fmt.Sprintf("CONNECT mcp.corp.test:%d", port)
	if log := sq.log(t, want); !strings.Contains(log, want) {
		t.Errorf("squid's log lacks %q:\n%s", want, log)
	}
}
