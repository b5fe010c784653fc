package policy

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var errLineRE = regexp.MustCompile(`^fuzz\.toml:([1-9][0-9]*): \S`)

var reasons = map[string]bool{ReasonAllowed: true, ReasonDeniedByRule: true, ReasonNoMatchingRule: true, ReasonPortNotAllowed: true, ReasonInvalidName: true,
	ReasonInvalidRequest: true, ReasonAmbiguousPath: true}

// FuzzParse checks that Parse never panics, that every error names the file
// and a line of it, and that the decisions of any accepted policy are
// consistent with each other (DecideHTTP included: it never allows what
// DecideName denies, and a "/x/.." prefix never changes its answer).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		briefExample,
		matchPolicy,
		"[network]\nallow = [\"*.a.test\", \"b.test:8080\"]\ndeny = [\"x.a.test\", \"b.test:8080\"]\n",
		"[upstream]\nresolve = { \"a.test\" = \"[::1]:8443\", \"b.test\" = \"c.test\" }\nca_files = [\"a.pem\"]\nallow_private = true\n",
		"network.allow = ['a.test']\nupstream.resolve.\"a.test\" = '10.0.0.1:1'\n",
		"[network]\nallow = [\n  \"a.test\", # c\n]\n",
		"[[network]]\n[Network]\nalow = 1\n",
		"[network]\nallow = [\"foo*.com\", \"10.0.0.1\", \"x:0\"]\n",
		"a = { b = { c = [1, [2, {d = 3}]] } }\n",
		"\ufeff[network]\r\ndefault = \"deny\"\r\n",
		httpPolicy,
		"[network]\nallow = [\"a.test\"]\n[[http]]\nhost = \"a.test\"\nmethods = [\"GET\"]\npaths = [\"/x/*\", \"/y\"]\naction = \"allow\"\n[[http]]\nhost = \"*.test\"\naction = \"deny\"\n",
		"network.allow = [\"a.test\"]\nhttp = [{ host = \"a.test\", paths = [\"/admin/*\"], action = \"deny\" }, { host = \"b.test\", action = \"allow\" }]\n",
		"[[http]]\nhost = \"a.test:1\"\nmethods = [\"G T\", \"get\", \"GET\"]\npaths = [\"x\", \"/a/../b\", \"/%2F\", \"/?\"]\naction = \"Allow\"\n[[http]]\n",
		"[http]\nhost = \"a.test\"\nhttp.action = 1\n[[HTTP]]\nHost = \"a\"\n",
		"[tls]\npassthrough = [\"*.a.test\", \"a.test\", \"*.A.test\", \"b:1\"]\n[[http]]\nhost = \"x.a.test\"\naction = \"deny\"\n",
		"[mitm]\npreview_bytes = 0\n",
		"[mitm]\npreview_bytes = -1\n[[mitm]]\nmitm.preview_bytes = 1048577\n",
		"[dns]\nmax_wildcard_names = 0\n",
		"[dns]\nmax_wildcard_names = -1\n[[dns]]\ndns.max_wildcard_names = \"x\"\n",
		mcpPolicy,
		"mcp = { hide_denied = false, rules = [{ server = \"a.test\", tools = [\"x*\"], action = \"deny\" }], servers = { gh = { command = [\"gh\"], env = { T = \"v\" } } } }\n",
		"[mcp.servers]\ngh.command = [\"gh\", \"mcp\"]\nr.url = \"https://a.test:8443/mcp?x=1\"\nr.headers.Authorization = \"Bearer x\"\n[[mcp.rules]]\nserver = \"r\"\naction = \"allow\"\n",
		"[mcp.rules]\nserver = \"x\"\n[[mcp.servers]]\n[mcp.servers.\"a b\"]\nurl = \"http://u:p@mcp.capsem.internal/#f\"\ncommand = []\nheaders = { \"A B\" = \"\\r\" }\n",
		"[tls]\npassthrough = [\"mcp.capsem.internal\"]\n[[mcp.rules]]\nserver = \"*.capsem.internal\"\ntools = []\naction = \"Deny\"\n[MCP]\nHide_denied = 1\n",
		"[network]\ndeny = [\"mcp.capsem.internal\"]\n[mcp.servers.gh]\ncommand = [\"gh\"]\ncwd = \"~x\"\nenv.\"A-B\" = \"v\"\n",
		"[quic]\nmode = \"block\"\n[[quic]]\nquic.mode = \"Intercept\"\n",
		"[dlp]\nexpected_hosts = { \"github-token\" = [\"a.test\", \"*.b.test\"], \"jwt\" = [], \"x\" = [\"c:1\"] }\ndefault_expected_hosts = false\n",
		"[dlp.expected_hosts]\n\"anthropic-key\" = [\"a.test\"]\nGitHub-Token = [1]\ndlp.expected_hosts.jwt = \"x\"\n[dlp]\nExpected_Hosts = { a = { b = [\"c\"] } }\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.toml", data)
		if err != nil {
			if p != nil {
				t.Fatal("policy and error both returned")
			}
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("internal error: %v", err)
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			for _, l := range strings.Split(err.Error(), "\n") {
				m := errLineRE.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("error line without file:line: %q", l)
				}
				if n, _ := strconv.Atoi(m[1]); n > lines {
					t.Fatalf("error on line %d of a %d-line file: %q", n, lines, l)
				}
			}
			return
		}
		if n := p.PreviewBytes(); n < 0 || n > MaxPreviewBytes {
			t.Fatalf("PreviewBytes() = %d", n)
		}
		checkMCP(t, p, data)
		allow, deny := p.Rules()
		// Requests: methods and paths from the input too.
		fields := strings.Fields(string(data))
		methods := []string{"GET", "post", "G T", ""}
		paths := []string{"/", "/admin", "/x/y", "/x/../admin", "/a%2Fb", "*", "", "/%zz", "/b?q"}
		for i, f := range fields {
			if i >= 8 {
				break
			}
			methods = append(methods, strings.Trim(f, "\"[],"))
			paths = append(paths, strings.Trim(f, "\"[],"))
		}
		checkHTTP := func(name string) {
			dns := p.DecideName(name)
			p.Passthrough(name)
			for _, m := range methods {
				for _, path := range paths {
					d := p.DecideHTTP(name, m, path)
					if !reasons[d.Reason] || d.Allowed != (d.Reason == ReasonAllowed) {
						t.Fatalf("DecideHTTP(%q, %q, %q) = %+v", name, m, path, d)
					}
					if d.Allowed && !dns.Allowed {
						t.Fatalf("DecideHTTP(%q, %q, %q) = %+v allows a name DecideName denies: %+v", name, m, path, d, dns)
					}
					if isPlainPath(path) {
						for _, prefix := range []string{"/zz/..", "/zz/%2e%2E", "/."} {
							if d2 := p.DecideHTTP(name, m, prefix+path); d2 != d {
								t.Fatalf("DecideHTTP(%q, %q, %q) = %+v, but %+v for %q", name, m, prefix+path, d2, d, path)
							}
						}
					}
				}
			}
		}
		check := func(name string, port uint16) {
			flow := p.DecideFlow(name, port)
			dns := p.DecideName(name)
			if !reasons[flow.Reason] || !reasons[dns.Reason] {
				t.Fatalf("unknown reason: %+v %+v", flow, dns)
			}
			if flow.Allowed != (flow.Reason == ReasonAllowed) || dns.Allowed != (dns.Reason == ReasonAllowed) {
				t.Fatalf("Allowed and Reason disagree: %+v %+v", flow, dns)
			}
			if flow.Allowed && !dns.Allowed {
				t.Fatalf("%s:%d allowed but its name is not: %+v", name, port, dns)
			}
			p.Resolve(name)
		}
		for _, e := range append(allow, deny...) {
			host, port := e, uint16(DefaultPort)
			if i := strings.LastIndexByte(e, ':'); i >= 0 {
				host = e[:i]
				n, _ := strconv.Atoi(e[i+1:])
				port = uint16(n)
			}
			if strings.HasPrefix(host, "*.") {
				host = "sub." + host[2:]
			}
			check(host, port)
			check(host, port+1)
			checkHTTP(host)
			check(strings.ToUpper(host)+".", port)
		}
		for _, e := range allow {
			// An exact allow entry allows its name and port, unless denied.
			if strings.HasPrefix(e, "*.") {
				continue
			}
			host, port := e, uint16(DefaultPort)
			if i := strings.LastIndexByte(e, ':'); i >= 0 {
				host = e[:i]
				n, _ := strconv.Atoi(e[i+1:])
				port = uint16(n)
			}
			if d := p.DecideFlow(host, port); !d.Allowed && d.Reason != ReasonDeniedByRule {
				t.Fatalf("allow entry %q: DecideFlow(%q, %d) = %+v", e, host, port, d)
			}
		}
		check(string(data), 443)
		checkHTTP(string(data))
	})
}

// isPlainPath reports whether a request path is valid and read only one way.
func isPlainPath(p string) bool {
	return validRequestPath(p) && p != "*" && !strings.ContainsAny(p, "?#") && isPlain(p)
}

// FuzzDecideHTTP feeds request methods and paths to the rules of
// httpPolicy: DecideHTTP never panics, and how a path is spelt (a "/x/.."
// detour, a percent-escaped letter) never changes its answer.
func FuzzDecideHTTP(f *testing.F) {
	p, err := Parse("p.toml", []byte(httpPolicy))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][2]string{
		{"GET", "/repos/x"}, {"get", "/repos/../admin"}, {"POST", "/admin%2Fx"}, {"GET", "/..;/admin"},
		{"GET", "/x//../admin"}, {"GET", "/\\admin"}, {"OPTIONS", "*"}, {"GET", "/%zz"}, {"G T", "/"},
		{"GET", "/files/a.exe?x=1"}, {"DELETE", "/public/%2e%2e/admin/"},
	} {
		f.Add(seed[0], seed[1])
	}
	hosts := []string{"api.github.com", "raw.githubusercontent.com", "open.test", "x.corp.test", "secret.corp.test"}
	f.Fuzz(func(t *testing.T, method, path string) {
		for _, h := range hosts {
			d := p.DecideHTTP(h, method, path)
			if !reasons[d.Reason] || d.Allowed != (d.Reason == ReasonAllowed) {
				t.Fatalf("DecideHTTP(%q, %q, %q) = %+v", h, method, path, d)
			}
			if d.Allowed && !p.DecideName(h).Allowed {
				t.Fatalf("DecideHTTP(%q, %q, %q) allows a denied name", h, method, path)
			}
			if isPlainPath(path) {
				if d2 := p.DecideHTTP(h, method, "/zz/.."+path); d2 != d {
					t.Fatalf("%q: %+v, but %+v with a /zz/.. detour", path, d, d2)
				}
			}
			// Escaping a letter changes nothing (when the path had no
			// escapes: otherwise "%" + "2F" could be made).
			if !validRequestPath(path) || strings.ContainsAny(path, "%?#") {
				continue
			}
			for i := 1; i < len(path); i++ {
				if c := path[i]; c >= 'a' && c <= 'z' {
					esc := path[:i] + "%" + strings.ToUpper(strconv.FormatUint(uint64(c), 16)) + path[i+1:]
					if d2 := p.DecideHTTP(h, method, esc); d2 != d {
						t.Fatalf("%q: %+v, but %+v for %q", path, d, d2, esc)
					}
					break
				}
			}
		}
	})
}

// checkMCP checks the [mcp] of an accepted policy: its servers are valid
// and sorted, the gateway's name is allowed exactly while there are
// servers (unless a deny entry says otherwise), and DecideMCPTool and
// MCPMayDeny agree, for servers and tools taken from the input too.
func checkMCP(t *testing.T, p *Policy, data []byte) {
	servers := p.MCPServers()
	gw := p.DecideFlow(MCPGatewayHost, 443)
	if p.MCPGateway(MCPGatewayHost) != (len(servers) > 0) {
		t.Fatalf("MCPGateway with %d servers", len(servers))
	}
	if len(servers) > 0 && !gw.Allowed && gw.Reason != ReasonDeniedByRule {
		t.Fatalf("the gateway's name with servers: %+v", gw)
	}
	names := []string{"a.test", "x.a.test", MCPGatewayHost, string(data)}
	for i, s := range servers {
		if i > 0 && servers[i-1].Name >= s.Name || !mcpServerName.MatchString(s.Name) || (len(s.Command) > 0) == (s.URL != "") {
			t.Fatalf("server %d: %+v", i, s)
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "https://") {
			t.Fatalf("server %s: url %q", s.Name, s.URL)
		}
		names = append(names, s.Name)
	}
	tools := []string{"", "x", "read_file", "*"}
	for i, f := range strings.Fields(string(data)) {
		if i >= 8 {
			break
		}
		names = append(names, strings.Trim(f, "\"[],"))
		tools = append(tools, strings.Trim(f, "\"[],"))
	}
	for _, n := range names {
		mayDeny := p.MCPMayDeny(n)
		for _, tool := range tools {
			d := p.DecideMCPTool(n, tool)
			unnamed := d.Reason == ReasonNoMatchingRule && d.Rule == "" && p.MCPUnknown() != UnknownAllow && d.Ask == (p.MCPUnknown() == UnknownAsk)
			if d.Allowed != (d.Reason == ReasonAllowed) || !d.Allowed && d.Reason != ReasonMCPToolDenied && !unnamed {
				t.Fatalf("DecideMCPTool(%q, %q) = %+v", n, tool, d)
			}
			if !d.Allowed && !mayDeny {
				t.Fatalf("DecideMCPTool(%q, %q) = %+v, but MCPMayDeny is false", n, tool, d)
			}
		}
	}
}

// FuzzOverlay writes an overlay of grants whose MCP tool (a name the guest
// chose) and entries are anything, and reads it back: what comes back is
// what went in, never more (a name cannot add a line to the file).
func FuzzOverlay(f *testing.F) {
	f.Add("pypi.org", "github", "create_issue")
	f.Add("a.test:8080", "srv.test", "x\"]\n[network]\nallow = [\"evil.test\"]\n#")
	f.Add("*.x.test", "s", "\\u0000\t'''")
	f.Fuzz(func(t *testing.T, entry, server, tool string) {
		g := Grants{Network: []string{entry}, MCP: []MCPGrant{{Server: server, Tool: tool}}}
		b, err := FormatOverlay("dev", g)
		if err != nil {
			return // go-toml refuses what it cannot write (invalid UTF-8): nothing is written
		}
		back, err := ParseOverlay("o.toml", b)
		if err != nil {
			t.Fatalf("the overlay capsem wrote does not read back: %v\n%s", err, b)
		}
		if len(back.Network) != 1 || back.Network[0] != entry || len(back.MCP) != 1 || back.MCP[0] != g.MCP[0] {
			t.Fatalf("wrote %+v, read %+v\n%s", g, back, b)
		}
	})
}
