package policy

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// mcpServerName is what NAME of [mcp.servers.NAME] may be: it is a path
// segment of https://mcp.capsem.internal/NAME and a server_name of the
// mcp_calls, so nothing that needs escaping in either.
var mcpServerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// mcpGatewayEntry is MCPGatewayHost as a host pattern.
var mcpGatewayEntry = entry{text: MCPGatewayHost, pattern: MCPGatewayHost, base: MCPGatewayHost}

// mcp builds [mcp] hide_denied, unknown and ask_timeout, and reports [tls] passthrough entries that
// cover the gateway's name: capsem serves that name itself, so it is
// never spliced.
func (b *builder) mcp(t *table) {
	if v, ok := b.cfg.boolAt(t, "hide_denied"); ok {
		b.p.mcpShowDenied = !v
	}
	b.askTable(t, &b.p.mcpAsk, UnknownAllow, UnknownDeny, UnknownAsk)
	for _, pe := range b.passList {
		if overlap(pe.e, mcpGatewayEntry) {
			b.c.add(pe.line, "passthrough entry %q covers %s, the name of capsem's own MCP gateway, which capsem serves and never splices; remove the entry or make it name only other hosts", pe.text, MCPGatewayHost)
		}
	}
}

// mcpServerLeaves are the values of one [mcp.servers.NAME] table.
type mcpServerLeaves struct {
	command, env, headers []leaf
	cwd, url              *leaf
}

// mcpServers checks and builds the [mcp.servers.NAME] tables, then allows
// the gateway's name on port 443 when there is a server.
func (b *builder) mcpServers(t *table) {
	names := b.w.names(t)
	b.mcpNames = names
	if len(names) == 0 {
		return
	}
	els := make([]mcpServerLeaves, len(names))
	depth := len(t.parts())
	for k, l := range b.w.values(t) {
		i, _ := slices.BinarySearch(names, l.path[depth])
		e := &els[i]
		switch k.name {
		case "command":
			e.command = append(e.command, *l)
		case "env":
			e.env = append(e.env, *l)
		case "headers":
			e.headers = append(e.headers, *l)
		case "cwd":
			e.cwd = l
		case "url":
			e.url = l
		}
	}
	for i, name := range names {
		first, last := b.w.nameLines(t, name)
		reported := b.c.reportedIn(first, last+1)
		if s, ok := b.mcpServer(t, name, first, &els[i], reported); ok {
			b.p.mcpServers = append(b.p.mcpServers, s)
		}
	}
	if len(b.p.mcpServers) > 0 {
		// First among the name's allow rules, so that a decision names
		// the gateway whatever [network] also says; a deny entry still
		// wins.
		n := b.node(mcpGatewayEntry)
		n.allow = append([]rule{{text: mcpGatewayRule, port: DefaultPort}}, n.allow...)
	}
}

// written returns the line of the key at path (exactly), or 0.
func (b *builder) written(path ...string) int {
	for _, k := range b.w.keys {
		if slices.Equal(k.path, path) {
			return k.line
		}
	}
	return 0
}

func (b *builder) mcpServer(t *table, name string, line int, el *mcpServerLeaves, reported bool) (MCPServer, bool) {
	s := MCPServer{Name: name, Line: line}
	ok := !reported
	if !mcpServerName.MatchString(name) {
		b.c.add(line, "[mcp.servers.%s]: write a NAME of 1 to 64 letters, digits, \"-\" and \"_\": the guest reaches the server at https://%s/NAME", formatKey([]string{name}), MCPGatewayHost)
		ok = false
	}
	where := "mcp.servers." + formatKey([]string{name})
	cmdLine := b.written(append(t.parts(), name, "command")...)
	switch {
	case cmdLine > 0 && el.url != nil:
		b.c.add(el.url.line, "%s has both command and url; keep command for a server capsem runs on the host, or url for a remote one", where)
		ok = false
	case cmdLine > 0:
		if len(el.command) == 0 {
			b.c.add(cmdLine, "%s.command is empty; write the program and its arguments, like command = [\"npx\", \"-y\", \"@modelcontextprotocol/server-github\"]", where)
			ok = false
		}
		for i, c := range el.command {
			switch {
			case i == 0 && c.value == "":
				b.c.add(c.line, "%s.command: the program (its first string) is empty; write the program's name or path", where)
				ok = false
			case strings.ContainsRune(c.value, 0):
				b.c.add(c.line, "%s.command: string %d contains a NUL byte, which no program can be given; remove it", where, i+1)
				ok = false
			}
			s.Command = append(s.Command, c.value)
		}
	case el.url != nil:
		u, problem := mcpURL(el.url.value)
		if problem != "" {
			b.c.add(el.url.line, "%s.url %q: %s", where, el.url.value, problem)
			ok = false
		}
		s.URL = u
	case !reported:
		b.c.add(line, "[%s] says neither how to start the server nor where it is; add command = [\"program\", \"arg\"] (a stdio server capsem runs on the host) or url = \"https://…\" (a remote streamable-HTTP server)", where)
		ok = false
	}
	if cmdLine == 0 && el.url != nil && (len(el.env) > 0 || el.cwd != nil) {
		at := slices.Concat(el.env, optLeaf(el.cwd))[0].line
		b.c.add(at, "%s: env and cwd are for a server capsem runs (command); a remote one (url) gets headers = { … }; remove them", where)
		ok = false
	}
	if cmdLine > 0 && len(el.headers) > 0 {
		b.c.add(el.headers[0].line, "%s: headers are for a remote server (url); a server capsem runs (command) gets env = { … }; remove them", where)
		ok = false
	}
	for _, l := range el.env {
		k := l.path[len(l.path)-1]
		switch {
		case !envName.MatchString(k):
			b.c.add(l.line, "%s.env: %q is not an environment variable name; use letters, digits and _, not starting with a digit", where, k)
			ok = false
		case strings.ContainsRune(l.value, 0):
			b.c.add(l.line, "%s.env.%s contains a NUL byte, which an environment variable cannot hold; remove it", where, k)
			ok = false
		default:
			if s.Env == nil {
				s.Env = map[string]string{}
			}
			s.Env[k] = l.value
		}
	}
	seen := map[string]leaf{}
	for _, l := range el.headers {
		k := l.path[len(l.path)-1]
		switch lk := strings.ToLower(k); {
		case !isToken(k):
			b.c.add(l.line, "%s.headers: %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~, no spaces or colons); fix it", where, k)
			ok = false
		case strings.ContainsAny(l.value, "\r\n\x00"):
			b.c.add(l.line, "%s.headers.%s: the value contains a line break or a NUL byte, which a header cannot carry; remove it", where, k)
			ok = false
		case seen[lk].line > 0:
			b.c.add(l.line, "%s.headers: %q repeats %q on line %d (header names ignore case); keep one of them", where, k, seen[lk].path[len(seen[lk].path)-1], seen[lk].line)
			ok = false
		default:
			seen[lk] = l
			if s.Headers == nil {
				s.Headers = map[string]string{}
			}
			s.Headers[k] = l.value
		}
	}
	if el.cwd != nil && el.url == nil {
		dir, problem := b.hostPath(el.cwd.value, "the path is empty; write the directory the server starts in, or remove cwd to start it where capsem runs")
		if problem != "" {
			b.c.add(el.cwd.line, "%s.cwd %q: %s", where, el.cwd.value, problem)
			ok = false
		}
		s.Cwd = dir
	}
	return s, ok
}

func optLeaf(l *leaf) []leaf {
	if l == nil {
		return nil
	}
	return []leaf{*l}
}

// mcpURL checks a remote server's url and returns it, or the problem.
func mcpURL(s string) (string, string) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Sprintf("this is not a URL (%v); write one like \"https://mcp.example.com/mcp\"", unwrapURLError(err))
	case u.Scheme == "http":
		return "", "capsem reaches remote MCP servers over https only: the credentials in headers must not cross the network in clear; write https://"
	case u.Scheme != "https":
		return "", "write an https:// URL, like \"https://mcp.example.com/mcp\""
	case u.Opaque != "" || u.Host == "":
		return "", "the URL has no host; write it like \"https://mcp.example.com/mcp\""
	case u.User != nil:
		return "", "credentials do not go in the URL, where logs show them; remove them and put them in headers = { Authorization = \"…\" }"
	case u.Fragment != "" || strings.HasSuffix(s, "#"):
		return "", "a fragment (\"#…\") is never sent to the server; remove it"
	}
	host := u.Hostname()
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if _, ok := parsePort(p); !ok {
			return "", portProblem(p)
		}
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" || addr.IsUnspecified() || addr.IsMulticast() {
			return "", fmt.Sprintf("%s cannot be connected to; write the address or name of the server", host)
		}
		return u.String(), ""
	}
	canon, np, at := checkName(host)
	switch {
	case np != nameOK:
		return "", describeNameProblem(host, np, at)
	case numericTLD(canon):
		return "", fmt.Sprintf("%q is neither a complete IP address nor a host name; write the server's name", host)
	case canon == MCPGatewayHost:
		return "", "this is capsem's own MCP gateway; write the URL of the remote server itself"
	}
	return u.String(), ""
}

// unwrapURLError drops the "parse \"…\": " that url.Parse puts before
// its reason (the message quotes the URL already).
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// mcpRuleLeaves are the values of one [[mcp.rules]] table.
type mcpRuleLeaves struct {
	server, action *leaf
	tools          []leaf
}

// mcpRules checks and builds the [[mcp.rules]], in file order.
func (b *builder) mcpRules(t *table) {
	elems := b.w.elems[t.name]
	if len(elems) == 0 {
		return
	}
	els := make([]mcpRuleLeaves, len(elems))
	for k, l := range b.w.values(t) {
		e := &els[l.elem]
		switch k.name {
		case "server":
			e.server = l
		case "action":
			e.action = l
		case "tools":
			e.tools = append(e.tools, *l)
		}
	}
	for i := range els {
		reported := b.c.reportedIn(elems[i], b.w.elemEnd(t.name, i))
		toolsLine := 0
		if len(els[i].tools) == 0 {
			toolsLine = b.toolsKeyLine(t, elems[i], b.w.elemEnd(t.name, i))
		}
		b.mcpRule(i+1, elems[i], &els[i], reported, toolsLine)
	}
}

// toolsKeyLine returns the line of a tools key in the element of
// [[mcp.rules]] that spans lines start to end, or 0.
func (b *builder) toolsKeyLine(t *table, start, end int) int {
	path := append(t.parts(), "tools")
	for _, k := range b.w.keys {
		if k.line >= start && k.line < end && slices.Equal(k.path, path) {
			return k.line
		}
	}
	return 0
}

// mcpRule checks and builds rule n, whose element starts on line. An
// empty tools list is on line toolsLine (0: none written).
func (b *builder) mcpRule(n, line int, el *mcpRuleLeaves, reported bool, toolsLine int) {
	ok := !reported
	r := mcpRule{}
	switch {
	case el.server == nil && reported:
	case el.server == nil:
		b.c.add(line, "[[mcp.rules]] rule %d has no server; add server = \"mcp.example.com\" (a host, or \"*.example.com\") or the NAME of an [mcp.servers.NAME] table", n)
		ok = false
	default:
		v := el.server.value
		if _, isServer := b.p.MCPServer(v); isServer {
			r.name = v
			break
		}
		if _, found := slices.BinarySearch(b.mcpNames, v); found {
			ok = false // the server's own table holds the problem
			break
		}
		host, problem := parseHostOnly(v, "[[mcp.rules]] apply on every port the host is allowed on")
		switch {
		case problem != "" && mcpServerName.MatchString(v):
			b.c.add(el.server.line, "mcp.rules server %q: there is no [mcp.servers.%s] table, and as a host name: %s; add the server's table, or write the host the rule is for", v, v, problem)
			ok = false
		case problem != "":
			b.c.add(el.server.line, "mcp.rules server %q: %s", v, problem)
			ok = false
		case !strings.Contains(host.base, ".") && !b.allowedName(host.pattern):
			// A name of one label is far likelier a NAME whose table is
			// missing or misspelt than a host the guest reaches: refuse it
			// unless [network] allows it as a host.
			b.c.add(el.server.line, "mcp.rules server %q: there is no [mcp.servers.%s] table, and [network] allows no host of that name; add the server's table, fix the NAME, or write the host's full name", v, v)
			ok = false
		case overlap(host, mcpGatewayEntry):
			b.c.add(el.server.line, "mcp.rules server %q covers %s: calls through capsem's MCP gateway are decided by the server's NAME; write server = \"NAME\" of its [mcp.servers.NAME] table", v, MCPGatewayHost)
			ok = false
		default:
			r.host = host
		}
	}
	switch {
	case el.action == nil && reported:
	case el.action == nil:
		b.c.add(line, "[[mcp.rules]] rule %d has no action; add action = \"allow\" or action = \"deny\"", n)
		ok = false
	case el.action.value == "allow":
		r.allow = true
	case el.action.value == "deny":
	default:
		b.c.add(el.action.line, "mcp.rules action %q: write \"allow\" or \"deny\" (in lower case)", el.action.value)
		ok = false
	}
	if toolsLine > 0 {
		b.c.add(toolsLine, "mcp.rules tools = []: an empty list matches no tool; list the tools, like tools = [\"read_*\"], or remove the key for every tool")
		ok = false
	}
	seen := map[string]leaf{}
	for _, tl := range el.tools {
		switch prev, dup := seen[tl.value]; {
		case tl.value == "":
			b.c.add(tl.line, "mcp.rules tool \"\": the name is empty; write a tool name like \"search\" (\"*\" matches any run of characters), or remove the entry")
			ok = false
		case dup:
			b.c.add(tl.line, "mcp.rules tool %q repeats %q on line %d; remove one of them", tl.value, prev.value, prev.line)
			ok = false
		default:
			seen[tl.value] = tl
			r.tools = append(r.tools, tl.value)
		}
	}
	if !ok {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "mcp.rules[%d] (line %d) server=%s", n, line, el.server.value)
	if len(r.tools) > 0 {
		sb.WriteString(" tools=" + strings.Join(r.tools, ","))
	}
	sb.WriteString(" action=" + el.action.value)
	r.text = sb.String()
	b.p.mcpRules = append(b.p.mcpRules, r)
}

// allowedName reports whether a [network] allow entry has pattern.
func (b *builder) allowedName(pattern string) bool {
	st := b.pats[pattern]
	return st != nil && len(st.allow) > 0
}
