package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// mcpPolicy is the issue's [mcp] example, with more rules.
const mcpPolicy = `[network]
allow = ["mcp.example.com", "*.tools.test"]

[mcp]
hide_denied = true

[[mcp.rules]]
server = "mcp.example.com"
tools = ["read_*", "search"]
action = "deny"

[[mcp.rules]]
server = "mcp.example.com"
action = "allow"

[[mcp.rules]]
server = "*.tools.test"
tools = ["*_env"]
action = "deny"

[[mcp.rules]]
server = "github"
tools = ["delete_*"]
action = "deny"

[mcp.servers.github]
command = ["npx", "-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_TOKEN = "ghp-host-only" }
cwd = "src"

[mcp.servers.remote]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer host-only" }
`

func TestMCPServers(t *testing.T) {
	p, err := Parse("/etc/capsem/p.toml", []byte(mcpPolicy))
	if err != nil {
		t.Fatal(err)
	}
	want := []MCPServer{
		{Name: "github", Command: []string{"npx", "-y", "@modelcontextprotocol/server-github"}, Env: map[string]string{"GITHUB_TOKEN": "ghp-host-only"}, Cwd: "/etc/capsem/src", Line: 26},
		{Name: "remote", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer host-only"}, Line: 31},
	}
	got := p.MCPServers()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MCPServers() = %+v\nwant %+v", got, want)
	}
	got[0].Command[0], got[0].Env["GITHUB_TOKEN"], got[1].Headers["Authorization"] = "sh", "x", "x"
	if s, ok := p.MCPServer("github"); !ok || !reflect.DeepEqual(s, want[0]) {
		t.Errorf("a caller's change reached the policy: %+v, %v", s, ok)
	}
	if !reflect.DeepEqual(p.MCPServers()[1], want[1]) {
		t.Errorf("a caller's change reached the policy: %+v", p.MCPServers()[1])
	}
	for _, c := range []struct {
		name string
		ok   bool
		why  string
	}{
		{"remote", true, "a configured server"},
		{"GitHub", false, "NAMEs are exact"},
		{"gitlab", false, "not configured"},
		{"", false, "empty"},
	} {
		if _, ok := p.MCPServer(c.name); ok != c.ok {
			t.Errorf("MCPServer(%q) found %v, want %v (%s)", c.name, ok, c.ok, c.why)
		}
	}
	if !p.MCPHideDenied() {
		t.Error("hide_denied = true not in force")
	}

	home, _ := os.UserHomeDir()
	for _, c := range []struct {
		src  string
		hide bool
		cwd  string
		why  string
	}{
		{"", true, "", "hide_denied is true when absent"},
		{"[mcp]\nhide_denied = false\n", false, "", "the file can show denied tools"},
		{"[mcp.servers.a]\ncommand = [\"x\"]\ncwd = \"~/src\"\n", true, filepath.Join(home, "src"), "~/ is the home directory"},
		{"[mcp.servers.a]\ncommand = [\"x\"]\ncwd = \"/srv/../tmp\"\n", true, "/tmp", "an absolute path is cleaned"},
		{"[mcp.servers.a]\ncommand = [\"x\"]\n", true, "", "no cwd: capsem's own"},
	} {
		p := mustParse(t, c.src)
		if p.MCPHideDenied() != c.hide {
			t.Errorf("%q: MCPHideDenied() = %v (%s)", c.src, p.MCPHideDenied(), c.why)
		}
		if s, ok := p.MCPServer("a"); ok && s.Cwd != c.cwd {
			t.Errorf("%q: cwd %q, want %q (%s)", c.src, s.Cwd, c.cwd, c.why)
		}
	}
	var nilPolicy *Policy
	if nilPolicy.MCPServers() != nil || !nilPolicy.MCPHideDenied() || nilPolicy.MCPGateway(MCPGatewayHost) {
		t.Error("a nil policy has MCP servers or shows denied tools")
	}
	if _, ok := nilPolicy.MCPServer("github"); ok {
		t.Error("a nil policy has a server")
	}
	if mustParse(t, "").MCPServers() != nil {
		t.Error("a policy without [mcp.servers] has servers")
	}
}

// TestMCPForms writes the same [mcp] in the ways TOML allows and checks
// that they all mean the same thing (and that the walker and the decoder
// agree on each: they disagree with an internal error).
func TestMCPForms(t *testing.T) {
	forms := []string{
		"[[mcp.rules]]\nserver = \"a.test\"\ntools = [\"x\"]\naction = \"deny\"\n[mcp.servers.gh]\ncommand = [\"gh\", \"mcp\"]\nenv = { T = \"v\" }\n",
		"mcp.rules = [{ server = \"a.test\", tools = [\"x\"], action = \"deny\" }]\nmcp.servers.gh.command = [\"gh\", \"mcp\"]\nmcp.servers.gh.env.T = \"v\"\n",
		"mcp = { rules = [{ server = \"a.test\", tools = [\"x\"], action = \"deny\" }], servers = { gh = { command = [\"gh\", \"mcp\"], env = { T = \"v\" } } } }\n",
		"[mcp]\nrules = [\n  { server = \"a.test\", tools = [\"x\"], action = \"deny\" },\n]\n[mcp.servers]\ngh.command = [\"gh\", \"mcp\"]\n[mcp.servers.gh.env]\nT = \"v\"\n",
	}
	for i, src := range forms {
		p, err := Parse("p.toml", []byte(src))
		if err != nil {
			t.Errorf("form %d: %v", i, err)
			continue
		}
		s, ok := p.MCPServer("gh")
		if d := p.DecideMCPTool("a.test", "x"); d.Allowed || !ok || !reflect.DeepEqual(s.Command, []string{"gh", "mcp"}) || s.Env["T"] != "v" {
			t.Errorf("form %d: decision %+v, server %+v", i, d, s)
		}
	}
}

func TestMCPParseErrors(t *testing.T) {
	const srv = "[mcp.servers.gh]\ncommand = [\"gh\"]\n"
	tests := []struct {
		name, src, want, why string
	}{
		{"hide_denied type", "[mcp]\nhide_denied = \"yes\"\n", `p.toml:2: mcp.hide_denied must be true or false, without quotes; found a string`, "a boolean"},
		{"mcp key", "[mcp]\nhide = true\n", `p.toml:2: unknown key "hide" in [mcp]: the keys of [mcp] are hide_denied, unknown, ask_timeout, rules, servers`, "the keys of [mcp] include its tables"},
		{"rule key in [mcp]", "[mcp]\nserver = \"a.test\"\n", `p.toml:2: key "server" belongs in the [[mcp.rules]] table, not in [mcp]`, "a rule's key written in [mcp]"},
		{"rules as one table", "[mcp.rules]\nserver = \"a.test\"\naction = \"deny\"\n", `p.toml:1: [[mcp.rules]] are an array of tables: start each rule with a "[[mcp.rules]]" line`, "two brackets"},
		{"rules dotted", "[mcp]\nrules.server = \"a.test\"\n", `p.toml:2: [[mcp.rules]] are an array of tables`, "a dotted key makes one table"},
		{"rules type", "[mcp]\nrules = 1\n", `p.toml:2: [[mcp.rules]] must be tables`, "the array's own type"},
		{"rule misspelt", "[[mcp.rules]]\nservr = \"a.test\"\naction = \"deny\"\n", `p.toml:2: unknown key "servr" in [[mcp.rules]]: did you mean "server"?`, "a typo is named, not 'has no server'"},
		{"rule case", "[[mcp.rules]]\nServer = \"a.test\"\naction = \"deny\"\n", `p.toml:2: key "Server" must be written in lower case, as "server"`, "keys are lower case"},
		{"no server", "[[mcp.rules]]\naction = \"deny\"\n", `p.toml:1: [[mcp.rules]] rule 1 has no server; add server = "mcp.example.com"`, "a rule is for a server"},
		{"no action", "[[mcp.rules]]\nserver = \"a.test\"\n", `p.toml:1: [[mcp.rules]] rule 1 has no action`, "the action is never implied"},
		{"bad action", "[[mcp.rules]]\nserver = \"a.test\"\naction = \"Deny\"\n", `p.toml:3: mcp.rules action "Deny": write "allow" or "deny" (in lower case)`, "two actions"},
		{"server with port", "[[mcp.rules]]\nserver = \"a.test:8443\"\naction = \"deny\"\n", `p.toml:2: mcp.rules server "a.test:8443": write the name without a port`, "hosts as in [[http]]"},
		{"server url", "[[mcp.rules]]\nserver = \"https://a.test/mcp\"\naction = \"deny\"\n", `p.toml:2: mcp.rules server "https://a.test/mcp": this looks like a URL`, "a host, not a URL"},
		{"unknown NAME", "[[mcp.rules]]\nserver = \"-github\"\naction = \"deny\"\n", `p.toml:2: mcp.rules server "-github": there is no [mcp.servers.-github] table, and as a host name:`, "neither a server nor a host"},
		{"one-label NAME", "[[mcp.rules]]\nserver = \"githb\"\naction = \"deny\"\n[mcp.servers.github]\ncommand = [\"gh\"]\n", `p.toml:2: mcp.rules server "githb": there is no [mcp.servers.githb] table, and [network] allows no host of that name`, "a misspelt NAME would silently become a host no flow reaches"},
		{"server NAME broken", "[[mcp.rules]]\nserver = \"gh\"\naction = \"deny\"\n[mcp.servers.gh]\nurl = \"http://a.test/\"\n", `p.toml:5: mcp.servers.gh.url "http://a.test/": capsem reaches remote MCP servers over https only`, "the broken server is reported, the rule naming it is not also"},
		{"gateway host", "[[mcp.rules]]\nserver = \"*.capsem.internal\"\naction = \"deny\"\n", `p.toml:2: mcp.rules server "*.capsem.internal" covers mcp.capsem.internal: calls through capsem's MCP gateway are decided by the server's NAME`, "the gateway's calls carry a NAME"},
		{"empty tools", "[[mcp.rules]]\nserver = \"a.test\"\ntools = []\naction = \"deny\"\n", `p.toml:3: mcp.rules tools = []: an empty list matches no tool`, "absent is every tool, empty is a mistake"},
		{"empty tool", "[[mcp.rules]]\nserver = \"a.test\"\ntools = [\"\"]\naction = \"deny\"\n", `p.toml:3: mcp.rules tool "": the name is empty`, "matches nothing"},
		{"repeated tool", "[[mcp.rules]]\nserver = \"a.test\"\ntools = [\"x\",\n \"x\"]\naction = \"deny\"\n", `p.toml:4: mcp.rules tool "x" repeats "x" on line 3`, "repeats are typos"},
		{"tools type", "[[mcp.rules]]\nserver = \"a.test\"\ntools = \"x\"\naction = \"deny\"\n", `p.toml:3: mcp.rules.tools must be an array of strings`, "a list even for one tool"},
		{"server key", srv + "comand = [\"x\"]\n", `p.toml:3: unknown key "comand" in [mcp.servers.NAME]: did you mean "command"? the keys of [mcp.servers.NAME] are command, env, cwd, url, headers`, "a typo in a server"},
		{"server key case", "[mcp.servers.gh]\nCommand = [\"gh\"]\n", `p.toml:2: key "Command" must be written in lower case, as "command"`, "keys are lower case, NAMEs any case"},
		{"servers array", "[[mcp.servers]]\ncommand = [\"gh\"]\n", `p.toml:1: [mcp.servers.NAME] must be a table`, "each server has a NAME"},
		{"server not a table", "[mcp.servers]\ngh = \"npx\"\n", `p.toml:2: [mcp.servers.NAME] must be a table`, "a NAME holds a table"},
		{"bad NAME", "[mcp.servers.\"git hub\"]\ncommand = [\"gh\"]\n", `p.toml:1: [mcp.servers."git hub"]: write a NAME of 1 to 64 letters, digits, "-" and "_"`, "the NAME is a URL path segment"},
		{"long NAME", "[mcp.servers." + strings.Repeat("a", 65) + "]\ncommand = [\"gh\"]\n", `p.toml:1: [mcp.servers.` + strings.Repeat("a", 65) + `]: write a NAME of 1 to 64`, "at most 64"},
		{"neither", "[mcp.servers.gh]\ncwd = \"/tmp\"\n", `p.toml:1: [mcp.servers.gh] says neither how to start the server nor where it is`, "command or url"},
		{"both", srv + "url = \"https://a.test/mcp\"\n", `p.toml:3: mcp.servers.gh has both command and url`, "exactly one"},
		{"empty command", "[mcp.servers.gh]\ncommand = []\n", `p.toml:2: mcp.servers.gh.command is empty`, "a program is needed"},
		{"empty program", "[mcp.servers.gh]\ncommand = [\"\", \"x\"]\n", `p.toml:2: mcp.servers.gh.command: the program (its first string) is empty`, "a program is needed"},
		{"NUL argument", "[mcp.servers.gh]\ncommand = [\"gh\", \"a\\u0000b\"]\n", `p.toml:2: mcp.servers.gh.command: string 2 contains a NUL byte`, "exec cannot pass it"},
		{"command type", "[mcp.servers.gh]\ncommand = \"npx -y server\"\n", `p.toml:2: mcp.servers.NAME.command must be an array of strings`, "no shell splitting"},
		{"env name", srv + "env = { \"A-B\" = \"v\" }\n", `p.toml:3: mcp.servers.gh.env: "A-B" is not an environment variable name`, "variables"},
		{"env type", srv + "env = { A = 1 }\n", `p.toml:3: mcp.servers.NAME.env must map variable names to strings`, "string values"},
		{"env for url", "[mcp.servers.r]\nurl = \"https://a.test/\"\nenv = { A = \"v\" }\n", `p.toml:3: mcp.servers.r: env and cwd are for a server capsem runs (command)`, "a remote server gets headers"},
		{"headers for command", srv + "headers = { A = \"v\" }\n", `p.toml:3: mcp.servers.gh: headers are for a remote server (url)`, "a process gets env"},
		{"header name", "[mcp.servers.r]\nurl = \"https://a.test/\"\nheaders = { \"X Y\" = \"v\" }\n", `p.toml:3: mcp.servers.r.headers: "X Y" is not a header name`, "an HTTP token"},
		{"header value", "[mcp.servers.r]\nurl = \"https://a.test/\"\nheaders = { X = \"a\\r\\nEvil: 1\" }\n", `p.toml:3: mcp.servers.r.headers.X: the value contains a line break`, "no header injection"},
		{"header repeat", "[mcp.servers.r]\nurl = \"https://a.test/\"\nheaders = { X = \"a\", x = \"b\" }\n", `p.toml:3: mcp.servers.r.headers: "x" repeats "X" on line 3`, "header names ignore case"},
		{"cwd tilde user", srv + "cwd = \"~bob/src\"\n", `p.toml:3: mcp.servers.gh.cwd "~bob/src": only "~/" (your home) is expanded`, "as from_file"},
		{"cwd empty", srv + "cwd = \"\"\n", `p.toml:3: mcp.servers.gh.cwd "": the path is empty`, "say nothing instead"},
		{"http url", "[mcp.servers.r]\nurl = \"http://a.test/mcp\"\n", `p.toml:2: mcp.servers.r.url "http://a.test/mcp": capsem reaches remote MCP servers over https only`, "headers carry credentials"},
		{"other scheme", "[mcp.servers.r]\nurl = \"wss://a.test/mcp\"\n", `p.toml:2: mcp.servers.r.url "wss://a.test/mcp": write an https:// URL`, "streamable HTTP"},
		{"no host", "[mcp.servers.r]\nurl = \"https:///mcp\"\n", `p.toml:2: mcp.servers.r.url "https:///mcp": the URL has no host`, "where to connect"},
		{"user info", "[mcp.servers.r]\nurl = \"https://u:p@a.test/mcp\"\n", `p.toml:2: mcp.servers.r.url "https://u:p@a.test/mcp": credentials do not go in the URL`, "logs show URLs"},
		{"bad host", "[mcp.servers.r]\nurl = \"https://a..test/mcp\"\n", `p.toml:2: mcp.servers.r.url "https://a..test/mcp": the name has an empty label`, "a host name"},
		{"bad port", "[mcp.servers.r]\nurl = \"https://a.test:0/mcp\"\n", `p.toml:2: mcp.servers.r.url "https://a.test:0/mcp": the port "0" must be a number from 1 to 65535`, "a port"},
		{"fragment", "[mcp.servers.r]\nurl = \"https://a.test/mcp#x\"\n", `p.toml:2: mcp.servers.r.url "https://a.test/mcp#x": a fragment`, "never sent"},
		{"gateway url", "[mcp.servers.r]\nurl = \"https://MCP.capsem.internal/r\"\n", `p.toml:2: mcp.servers.r.url "https://MCP.capsem.internal/r": this is capsem's own MCP gateway`, "a loop"},
		{"passthrough gateway", "[tls]\npassthrough = [\"*.capsem.internal\"]\n", `p.toml:2: passthrough entry "*.capsem.internal" covers mcp.capsem.internal, the name of capsem's own MCP gateway`, "the gateway is served by capsem, never spliced"},
	}
	for _, c := range tests {
		_, err := Parse("p.toml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (%s):\n got %v\nwant %s", c.name, c.why, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestDecideMCPTool(t *testing.T) {
	p := mustParse(t, mcpPolicy)
	const (
		r1 = "mcp.rules[1] (line 7) server=mcp.example.com tools=read_*,search action=deny"
		r2 = "mcp.rules[2] (line 12) server=mcp.example.com action=allow"
		r3 = "mcp.rules[3] (line 16) server=*.tools.test tools=*_env action=deny"
		r4 = "mcp.rules[4] (line 21) server=github tools=delete_* action=deny"
	)
	for _, c := range []struct {
		server, tool string
		want         Decision
		why          string
	}{
		{"mcp.example.com", "read_file", Decision{Rule: r1, Reason: ReasonMCPToolDenied}, "a glob of the first rule"},
		{"mcp.example.com", "search", Decision{Rule: r1, Reason: ReasonMCPToolDenied}, "an exact tool"},
		{"mcp.example.com", "search2", Decision{Allowed: true, Rule: r2, Reason: ReasonAllowed}, "an exact tool is not a prefix: the next rule allows"},
		{"mcp.example.com", "write_file", Decision{Allowed: true, Rule: r2, Reason: ReasonAllowed}, "first match wins: the allow rule for every tool"},
		{"MCP.Example.com.", "read_x", Decision{Rule: r1, Reason: ReasonMCPToolDenied}, "hosts ignore case and a trailing dot"},
		{"mcp.example.com:443", "read_x", Decision{Rule: r1, Reason: ReasonMCPToolDenied}, "a port is not part of the host"},
		{"mcp.example.com/mcp", "read_x", Decision{Rule: r1, Reason: ReasonMCPToolDenied}, "nor the path an mcp_call names the server by"},
		{"mcp.example.com", "Read_file", Decision{Allowed: true, Rule: r2, Reason: ReasonAllowed}, "tool names are case-sensitive"},
		{"a.tools.test", "print_env", Decision{Rule: r3, Reason: ReasonMCPToolDenied}, "a wildcard host"},
		{"b.a.tools.test", "print_env", Decision{Rule: r3, Reason: ReasonMCPToolDenied}, "a wildcard host at any depth"},
		{"tools.test", "print_env", Decision{Allowed: true, Reason: ReasonAllowed}, "a wildcard host is not its base"},
		{"a.tools.test", "print", Decision{Allowed: true, Reason: ReasonAllowed}, "no rule matches: allow, without a rule"},
		{"github", "delete_repo", Decision{Rule: r4, Reason: ReasonMCPToolDenied}, "a gateway server's NAME"},
		{"GitHub", "delete_repo", Decision{Allowed: true, Reason: ReasonAllowed}, "NAMEs are exact"},
		{"github.com", "delete_repo", Decision{Allowed: true, Reason: ReasonAllowed}, "a NAME is not a host pattern"},
		{"remote", "read_file", Decision{Allowed: true, Reason: ReasonAllowed}, "the remote server's NAME is not its host"},
		{"other.test", "read_file", Decision{Allowed: true, Reason: ReasonAllowed}, "a server no rule names"},
		{"", "", Decision{Allowed: true, Reason: ReasonAllowed}, "empty: no rule matches"},
		{"a..b", "x", Decision{Allowed: true, Reason: ReasonAllowed}, "not a host: only NAME rules could match"},
	} {
		if got := p.DecideMCPTool(c.server, c.tool); got != c.want {
			t.Errorf("DecideMCPTool(%q, %q) = %+v\nwant %+v (%s)", c.server, c.tool, got, c.want, c.why)
		}
	}
	var nilPolicy *Policy
	if d := nilPolicy.DecideMCPTool("mcp.example.com", "read_file"); d != (Decision{Allowed: true, Reason: ReasonAllowed}) {
		t.Errorf("a nil policy: %+v (it only refines what the network policy allowed)", d)
	}
	if d := DenyAll().DecideMCPTool("x.test", "y"); !d.Allowed {
		t.Errorf("DenyAll: %+v", d)
	}
	// A host of one label is a host when [network] allows it.
	one := mustParse(t, "[network]\nallow = [\"intranet:8080\"]\n[[mcp.rules]]\nserver = \"intranet\"\naction = \"deny\"\n")
	if d := one.DecideMCPTool("Intranet:8080", "x"); d.Allowed || d.Rule != "mcp.rules[1] (line 3) server=intranet action=deny" {
		t.Errorf("a one-label host allowed by [network]: %+v", d)
	}
	refusal := MCPRefusal("tools/call", "read_file", p.DecideMCPTool("mcp.example.com", "read_file"))
	if !strings.HasPrefix(refusal, "capsem: tools/call of tool \"read_file\" refused by "+r1+" (mcp-tool-denied).") {
		t.Errorf("refusal %q", refusal)
	}
}

func TestMCPMayDeny(t *testing.T) {
	p := mustParse(t, mcpPolicy+`
[[mcp.rules]]
server = "all.test"
tools = ["*"]
action = "allow"

[[mcp.rules]]
server = "all.test"
action = "deny"

[[mcp.rules]]
server = "some.test"
tools = ["safe"]
action = "allow"

[[mcp.rules]]
server = "some.test"
action = "deny"
`)
	for _, c := range []struct {
		server string
		want   bool
		why    string
	}{
		{"mcp.example.com", true, "a deny rule comes first"},
		{"x.tools.test", true, "a deny rule on a wildcard"},
		{"github", true, "a deny rule on a NAME"},
		{"remote", false, "no rule names it"},
		{"other.test", false, "no rule names it"},
		{"all.test", false, "an allow rule for every tool (\"*\") comes before the deny"},
		{"some.test", true, "an allow rule for some tools leaves the others to the deny"},
	} {
		if got := p.MCPMayDeny(c.server); got != c.want {
			t.Errorf("MCPMayDeny(%q) = %v, want %v (%s)", c.server, got, c.want, c.why)
		}
		// MayDeny false means no tool is denied.
		if !p.MCPMayDeny(c.server) {
			for _, tool := range []string{"read_file", "x", "delete_repo", "print_env", "safe", ""} {
				if d := p.DecideMCPTool(c.server, tool); !d.Allowed {
					t.Errorf("MCPMayDeny(%q) false but %q is denied: %+v", c.server, tool, d)
				}
			}
		}
	}
	var nilPolicy *Policy
	if nilPolicy.MCPMayDeny("mcp.example.com") || mustParse(t, "").MCPMayDeny("x.test") {
		t.Error("no rules, yet a tool may be denied")
	}
}

// TestMCPGatewayName: the gateway's name is allowed on 443 while a server
// is configured, without a [network] entry; a deny entry still wins.
func TestMCPGatewayName(t *testing.T) {
	const server = "[mcp.servers.gh]\ncommand = [\"gh\"]\n"
	gw := Decision{Allowed: true, Rule: "[mcp.servers]", Reason: ReasonAllowed}
	for _, c := range []struct {
		src          string
		name         string
		dns, flow443 Decision
		flow80       bool
		gateway      bool
		why          string
	}{
		{server, MCPGatewayHost, gw, gw, false, true, "a server: the name is the gateway's, on 443 only"},
		{server, "MCP.Capsem.Internal.", gw, gw, false, true, "names are canonical"},
		{server, "x.capsem.internal", Decision{Reason: ReasonNoMatchingRule}, Decision{Reason: ReasonNoMatchingRule}, false, false, "only the gateway's own name"},
		{"", MCPGatewayHost, Decision{Reason: ReasonNoMatchingRule}, Decision{Reason: ReasonNoMatchingRule}, false, false, "no server: a name like any"},
		{"[network]\nallow = [\"mcp.capsem.internal\"]\n", MCPGatewayHost, Decision{Allowed: true, Rule: "mcp.capsem.internal", Reason: ReasonAllowed}, Decision{Allowed: true, Rule: "mcp.capsem.internal", Reason: ReasonAllowed}, false, false, "no server: decided like any name, and not served locally"},
		{"[network]\ndeny = [\"mcp.capsem.internal\"]\n" + server, MCPGatewayHost, Decision{Rule: "mcp.capsem.internal", Reason: ReasonDeniedByRule}, Decision{Rule: "mcp.capsem.internal", Reason: ReasonDeniedByRule}, false, true, "a deny entry wins"},
		{"[network]\ndeny = [\"*.capsem.internal\"]\n" + server, MCPGatewayHost, Decision{Rule: "*.capsem.internal", Reason: ReasonDeniedByRule}, Decision{Rule: "*.capsem.internal", Reason: ReasonDeniedByRule}, false, true, "a wildcard deny entry wins"},
		{"[network]\nallow = [\"mcp.capsem.internal:80\"]\n" + server, MCPGatewayHost, gw, gw, true, true, "a [network] entry adds its port; the gateway's rule is named first"},
	} {
		p := mustParse(t, c.src)
		if d := p.DecideName(c.name); d != c.dns {
			t.Errorf("%s: DecideName(%q) = %+v, want %+v", c.why, c.name, d, c.dns)
		}
		if d := p.DecideFlow(c.name, 443); d != c.flow443 {
			t.Errorf("%s: DecideFlow(%q, 443) = %+v, want %+v", c.why, c.name, d, c.flow443)
		}
		if d := p.DecideFlow(c.name, 80); d.Allowed != c.flow80 {
			t.Errorf("%s: DecideFlow(%q, 80) = %+v", c.why, c.name, d)
		}
		if got := p.MCPGateway(c.name); got != c.gateway {
			t.Errorf("%s: MCPGateway(%q) = %v", c.why, c.name, got)
		}
		if d := p.DecideHTTP(c.name, "POST", "/gh"); d.Allowed != c.flow443.Allowed {
			t.Errorf("%s: DecideHTTP = %+v", c.why, d)
		}
	}
	// The gateway's rule is not an allow entry of the file.
	if allow, _ := mustParse(t, server).Rules(); len(allow) != 0 {
		t.Errorf("Rules() = %q", allow)
	}
}

func TestMCPSummary(t *testing.T) {
	s := mustParse(t, mcpPolicy).Summarize()
	if len(s.MCPRules) != 4 || s.MCPRules[0] != "mcp.rules[1] (line 7) server=mcp.example.com tools=read_*,search action=deny" {
		t.Errorf("mcp rules %q", s.MCPRules)
	}
	if !reflect.DeepEqual(s.MCPServers, []string{"github (command npx)", "remote (url https://mcp.example.com/mcp)"}) || !s.MCPHideDenied {
		t.Errorf("mcp servers %q hide %v", s.MCPServers, s.MCPHideDenied)
	}
	for _, v := range append(s.MCPServers, s.MCPRules...) {
		if strings.Contains(v, "host-only") {
			t.Errorf("the summary shows a credential: %q", v)
		}
	}
	q := mustParse(t, "[mcp.servers.r]\nurl = \"https://a.test/mcp?token=secret-in-query\"\n").Summarize()
	if !reflect.DeepEqual(q.MCPServers, []string{"r (url https://a.test/mcp)"}) {
		t.Errorf("a url's query is shown: %q", q.MCPServers)
	}
}
