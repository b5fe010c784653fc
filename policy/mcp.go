package policy

import (
	"maps"
	"slices"
	"strings"
)

// MCPServer is one [mcp.servers.NAME] table: a server of capsem's MCP
// gateway, which the guest reaches at https://mcp.capsem.internal/NAME
// while its credentials (Env, Headers) stay on the host. Exactly one of
// Command and URL is set.
type MCPServer struct {
	Name string // NAME: letters, digits, "-" and "_", 1 to 64 of them
	// Command is a stdio server run on the host: the program, then its
	// arguments; nil for a remote server.
	Command []string
	// Env is what the process gets besides PATH and HOME (it gets nothing
	// else of capsem's environment); nil when the file gave none.
	Env map[string]string
	// Cwd is the directory the process starts in (absolute: "~/" expanded,
	// a relative path joined to the policy file's directory); "" is the
	// directory capsem runs in.
	Cwd string
	// URL is a remote streamable-HTTP server, always https; "" for a stdio
	// server.
	URL string
	// Headers are sent with every request to URL; nil when the file gave
	// none.
	Headers map[string]string
	Line    int // the line of the table's header (or its first key)
}

// mcpRule is one [[mcp.rules]] table.
type mcpRule struct {
	text  string   // Decision.Rule
	allow bool     // action = "allow"
	name  string   // the NAME of a gateway server; "" when host is the pattern
	host  entry    // a name or "*.name" pattern, when name is ""
	tools []string // globs; nil: every tool
	// exact: tools are names, not globs. A grant's tool is a name the
	// guest chose: a tool called "*" allowed once must not allow them all.
	exact bool
}

// matchesServer reports whether the rule is for server, given as it was
// (a NAME is compared exactly) and as a canonical host (hostOK false when
// it is not one).
func (r *mcpRule) matchesServer(server, host string, hostOK bool) bool {
	if r.name != "" {
		return server == r.name
	}
	if !hostOK {
		return false
	}
	if r.host.wildcard {
		return strings.HasSuffix(host, "."+r.host.base)
	}
	return host == r.host.base
}

// matchesTool reports whether tool is one of the rule's tools.
func (r *mcpRule) matchesTool(tool string) bool {
	if r.exact {
		return slices.Contains(r.tools, tool)
	}
	if r.tools == nil {
		return true
	}
	for _, g := range r.tools {
		if globMatch(g, tool) {
			return true
		}
	}
	return false
}

// everyTool reports whether the rule matches every tool name.
func (r *mcpRule) everyTool() bool {
	return !r.exact && (r.tools == nil || slices.Contains(r.tools, "*"))
}

// mcpHost returns the canonical host of server, a host or a gateway
// server's NAME: a ":port" and anything from the first "/" (the host and
// path an mcp_call names a remote server by) are dropped first, since no
// NAME holds either. ok is false when what is left is not a host name.
func mcpHost(server string) (string, bool) {
	if i := strings.IndexByte(server, '/'); i >= 0 {
		server = server[:i]
	}
	if i := strings.LastIndexByte(server, ':'); i >= 0 {
		if _, ok := parsePort(server[i+1:]); ok {
			server = server[:i]
		}
	}
	return Canonical(server)
}

// DecideMCPTool decides an MCP tools/call of tool on server. server is a
// host, matched against the rules' host patterns like [network] matches
// names (case-insensitively, a trailing dot ignored; a ":port" or "/path"
// after it is ignored), or the NAME of a gateway server, matched exactly
// against the rules that name it.
//
// The [[mcp.rules]] are tried in file order and the first whose server
// and tools match decides: Allowed is its action, Rule names it
// ("mcp.rules[2] (line 16) server=mcp.example.com tools=read_*,search
// action=deny", counting from 1; without tools= when it has none) and
// Reason is ReasonAllowed or ReasonMCPToolDenied. When no rule matches,
// [mcp] unknown decides with Rule "": the call is allowed (the default),
// denied with ReasonNoMatchingRule, or denied with Ask set ("ask"). A nil
// policy allows: MCP decisions only refine flows that the network policy
// has already allowed.
func (p *Policy) DecideMCPTool(server, tool string) Decision {
	if !p.usable() {
		return Decision{Allowed: true, Reason: ReasonAllowed}
	}
	if len(p.mcpRules) == 0 {
		return p.mcpUnnamed()
	}
	host, hostOK := mcpHost(server)
	for i := range p.mcpRules {
		r := &p.mcpRules[i]
		if !r.matchesServer(server, host, hostOK) || !r.matchesTool(tool) {
			continue
		}
		if r.allow {
			return Decision{Allowed: true, Rule: r.text, Reason: ReasonAllowed}
		}
		return Decision{Rule: r.text, Reason: ReasonMCPToolDenied}
	}
	return p.mcpUnnamed()
}

// mcpUnnamed is the decision on a tool no rule names: [mcp] unknown.
func (p *Policy) mcpUnnamed() Decision {
	switch p.mcpAsk.mode {
	case UnknownDeny:
		return Decision{Reason: ReasonNoMatchingRule}
	case UnknownAsk:
		return Decision{Reason: ReasonNoMatchingRule, Ask: true}
	}
	return Decision{Allowed: true, Reason: ReasonAllowed}
}

// MCPMayDeny reports whether DecideMCPTool could deny some tool of server:
// a deny rule for server comes before any allow rule for server that
// matches every tool, or no such allow rule exists and [mcp] unknown is
// not "allow". It is false for most servers of most policies, and
// then a caller need not hold an MCP request's body to read its tool
// before forwarding it.
func (p *Policy) MCPMayDeny(server string) bool {
	if !p.usable() {
		return false
	}
	unnamed := p.MCPUnknown() != UnknownAllow // a tool no rule names is refused or asked about
	host, hostOK := mcpHost(server)
	for i := range p.mcpRules {
		r := &p.mcpRules[i]
		if !r.matchesServer(server, host, hostOK) {
			continue
		}
		if !r.allow {
			return true
		}
		if r.everyTool() {
			return false
		}
	}
	return unnamed
}

// MCPHideDenied is [mcp] hide_denied: whether tools/list results leave out
// the tools DecideMCPTool denies, so that agents do not try them. True
// when the file does not say, and for a nil policy.
func (p *Policy) MCPHideDenied() bool {
	return !p.usable() || !p.mcpShowDenied
}

// MCPServers returns the [mcp.servers] tables, sorted by Name. They are
// copies: changing them changes nothing in p.
func (p *Policy) MCPServers() []MCPServer {
	if !p.usable() || len(p.mcpServers) == 0 {
		return nil
	}
	out := make([]MCPServer, len(p.mcpServers))
	for i := range p.mcpServers {
		out[i] = p.mcpServers[i].clone()
	}
	return out
}

// MCPServer returns a copy of the server called name (exactly), and
// whether there is one.
func (p *Policy) MCPServer(name string) (MCPServer, bool) {
	if !p.usable() {
		return MCPServer{}, false
	}
	i, ok := slices.BinarySearchFunc(p.mcpServers, name, func(s MCPServer, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return MCPServer{}, false
	}
	return p.mcpServers[i].clone(), true
}

// MCPGateway reports whether name is MCPGatewayHost (as Canonical reads
// it) and the policy has servers for the gateway to serve: a flow to it
// is served by capsem, never dialled upstream. It decides nothing:
// DecideFlow does.
func (p *Policy) MCPGateway(name string) bool {
	if !p.usable() || len(p.mcpServers) == 0 {
		return false
	}
	canon, ok := Canonical(name)
	return ok && canon == MCPGatewayHost
}

// mcpGatewayRule is the Decision.Rule of the gateway's name, allowed on
// port 443 while a server is configured.
const mcpGatewayRule = "[mcp.servers]"

func (s *MCPServer) clone() MCPServer {
	c := *s
	c.Command = slices.Clone(s.Command)
	c.Env = maps.Clone(s.Env)
	c.Headers = maps.Clone(s.Headers)
	return c
}
