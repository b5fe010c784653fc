package learn

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/capsem/capsem/policy"
)

// httpRules writes [[http]] rules for the hosts whose requests are
// narrow (a few methods and path prefixes), or were refused some: allow
// rules for what was allowed, then a rule denying the rest of the host.
// A host's rules are written only when they decide every one of its
// recorded requests as the sessions saw them decided.
func httpRules(w *writer, seen []Seen) {
	byHost := map[string][]Seen{}
	for _, s := range seen {
		// The MCP gateway's requests are capsem's to serve, decided by
		// [[mcp.rules]]: no [[http]] rule for it.
		if s.Kind == KindRequest && s.Name != policy.MCPGatewayHost {
			byHost[s.Name] = append(byHost[s.Name], s)
		}
	}
	for _, host := range slices.Sorted(maps.Keys(byHost)) {
		reqs := byHost[host]
		refused := slices.ContainsFunc(reqs, func(s Seen) bool { return !s.Allowed })
		var text string
		for _, exact := range []bool{false, true} {
			t, wide := hostRules(host, reqs, exact)
			if wide && !refused {
				w.line("\n# %s: its requests spread over more than %d path prefixes or %d methods: no [[http]] rules", host, wideHTTPPrefixes, wideHTTPMethods)
				break
			}
			if rulesReproduce(host, t, reqs) {
				text = t
				break
			}
		}
		if text == "" {
			w.line("\n# %s: no [[http]] rules decide its requests as the session saw them decided (a reload mid-session?)", host)
			continue
		}
		w.WriteString(text)
	}
}

// hostRules are the [[http]] rules of host's requests: per method, the
// path prefixes (exact: the paths) it allowed, then a deny of the rest.
// wide says the requests were too varied for rules to mean much.
func hostRules(host string, reqs []Seen, exact bool) (string, bool) {
	paths := map[string]map[string]int64{} // method → path pattern → events
	prefixes := map[string]bool{}
	for _, s := range reqs {
		if !s.Allowed {
			continue
		}
		p := pathPattern(s.Path, exact)
		if paths[s.Method] == nil {
			paths[s.Method] = map[string]int64{}
		}
		paths[s.Method][p] += s.Events
		prefixes[p] = true
	}
	wide := len(prefixes) > wideHTTPPrefixes || len(paths) > wideHTTPMethods
	var b strings.Builder
	var total int64
	for _, m := range slices.Sorted(maps.Keys(paths)) {
		ps := slices.Sorted(maps.Keys(paths[m]))
		var n int64
		for _, p := range ps {
			n += paths[m][p]
		}
		total += n
		fmt.Fprintf(&b, "\n[[http]] # %s\nhost = %s\nmethods = [%s]\npaths = [%s]\naction = \"allow\"\n", plural(n, "request"), quote(host), quote(m), quoteAll(ps))
	}
	refused := int64(0)
	for _, s := range reqs {
		if !s.Allowed {
			refused += s.Events
		}
	}
	fmt.Fprintf(&b, "\n[[http]] # the rest of %s: %s refused in the session\nhost = %s\naction = \"deny\"\n", host, plural(refused, "request"), quote(host))
	return b.String(), wide
}

// pathPattern is the [[http]] paths entry that covers path: itself when
// exact or when it has at most two segments, else its first two and "*".
// A segment a pattern cannot hold (its characters are not a path's as
// written) ends the prefix there.
func pathPattern(path string, exact bool) string {
	esc := escapedPath(path)
	segs := strings.Split(strings.TrimPrefix(esc, "/"), "/")
	plain := func(s string) bool { return !strings.ContainsAny(s, "%*") }
	if exact && plain(strings.Join(segs, "")) {
		return esc
	}
	keep := 0
	for keep < len(segs) && keep < 2 && plain(segs[keep]) {
		keep++
	}
	if keep == len(segs) {
		return esc
	}
	return "/" + strings.Join(segs[:keep], "/") + slashIf(keep > 0) + "*"
}

func slashIf(b bool) string {
	if b {
		return "/"
	}
	return ""
}

// rulesReproduce reports whether rules, under a [network] that allows
// host, decide each of reqs as it was decided.
func rulesReproduce(host, rules string, reqs []Seen) bool {
	p, err := policy.Parse("rules", []byte("[network]\nallow = ["+quote(host)+"]\n"+rules))
	if err != nil {
		return false
	}
	for _, s := range reqs {
		if Decide(p, s.Key).Allowed != s.Allowed {
			return false
		}
	}
	return true
}

// mcpRules writes [mcp] and the [[mcp.rules]] allowing each tool called:
// a tool no rule names is then refused (or asked about, when the base
// asks).
func mcpRules(w *writer, seen []Seen, base *policy.Policy, haveBase bool, entries []entry) {
	tools := map[string]map[string]int64{} // server → tool → calls
	var unnamedTools []string
	for _, s := range seen {
		if s.Kind != KindMCP || !s.Allowed {
			continue
		}
		server := mcpRuleServer(s.Name, base)
		if strings.Contains(s.Tool, "*") {
			// A rule's tools are globs, and a tool name the guest chose
			// with a "*" in it would allow every tool it matches.
			unnamedTools = append(unnamedTools, fmt.Sprintf("\n# MCP tool %s of %s: %s; a \"*\" in its name would be a glob in a rule, so no rule names it and a tool no rule names is not refused",
				quote(s.Tool), quote(server), plural(s.Events, "call")))
			continue
		}
		if tools[server] == nil {
			tools[server] = map[string]int64{}
		}
		tools[server][s.Tool] += s.Events
	}
	rules, unnamed := []string(nil), unnamedTools
	for _, server := range slices.Sorted(maps.Keys(tools)) {
		ts := slices.Sorted(maps.Keys(tools[server]))
		var n int64
		for _, t := range ts {
			n += tools[server][t]
		}
		rule := fmt.Sprintf("\n[[mcp.rules]] # %s\nserver = %s\ntools = [%s]\naction = \"allow\"\n", plural(n, "call"), quote(server), quoteAll(ts))
		if ruleStands(rule, entries, base) {
			rules = append(rules, rule)
			continue
		}
		// A server no rule can name: a host of one label the suggestion
		// does not allow, a tool a TOML file cannot hold.
		unnamed = append(unnamed, fmt.Sprintf("\n# MCP server %s: %s no [[mcp.rules]] entry here can name; so a tool no rule names is not refused", quote(server), plural(n, "call")))
	}
	unknown := ""
	switch {
	case base.MCPUnknown() == policy.UnknownAsk:
		unknown = policy.UnknownAsk
	case len(unnamed) > 0: // refusing what no rule names would refuse those calls
	case len(rules) > 0:
		unknown = policy.UnknownDeny
	case haveBase && base.MCPUnknown() != policy.UnknownAllow:
		unknown = base.MCPUnknown()
	}
	hide := haveBase && !base.MCPHideDenied()
	if unknown != "" || hide {
		w.line("\n[mcp]")
		if hide {
			w.line("hide_denied = false")
		}
		if unknown != "" {
			w.line("unknown = %s # a tool no rule names", quote(unknown))
		}
		if haveBase && base.MCPAskTimeout() != policy.DefaultAskTimeout {
			w.line("ask_timeout = %d", int(base.MCPAskTimeout().Seconds()))
		}
	}
	for _, r := range slices.Concat(unnamed, rules) {
		w.WriteString(r)
	}
	w.WriteByte('\n')
}

// ruleStands reports whether an [[mcp.rules]] rule parses under the
// suggestion's [network] entries, with the base's servers.
func ruleStands(rule string, entries []entry, base *policy.Policy) bool {
	var b strings.Builder
	b.WriteString("[network]\nallow = [")
	for i, e := range entries {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(e.text))
	}
	b.WriteString("]\n")
	for _, s := range base.MCPServers() {
		fmt.Fprintf(&b, "[mcp.servers.%s]\nurl = \"https://example.com/\"\n", quote(s.Name))
	}
	b.WriteString(rule)
	_, err := policy.Parse("rule", []byte(b.String()))
	return err == nil
}

// mcpRuleServer is how an [[mcp.rules]] names the server an mcp_call
// names: a gateway server by its NAME, a remote one by its host (the
// call names "host/path").
func mcpRuleServer(server string, base *policy.Policy) string {
	if _, ok := base.MCPServer(server); ok {
		return server
	}
	host, _, _ := strings.Cut(server, "/")
	return host
}
