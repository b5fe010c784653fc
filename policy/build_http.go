package policy

import (
	"fmt"
	"strings"
)

// httpRuleLeaves are the values of one [[http]] table.
type httpRuleLeaves struct {
	host, action   *leaf
	methods, paths []leaf
}

// httpRules checks and builds the [[http]] rules, in file order.
func (b *builder) httpRules(t *table) {
	elems := b.w.elems[t.name]
	if len(elems) == 0 {
		return
	}
	els := make([]httpRuleLeaves, len(elems))
	for k, l := range b.w.values(t) {
		e := &els[l.elem]
		switch k.name {
		case "host":
			e.host = l
		case "action":
			e.action = l
		case "methods":
			e.methods = append(e.methods, *l)
		case "paths":
			e.paths = append(e.paths, *l)
		}
	}
	b.p.httpExact = map[string][]int{}
	b.p.httpWild = map[string][]int{}
	for i := range els {
		// A rule with a misspelt or mis-cased key has already been
		// reported: do not add "has no host" to it.
		reported := b.c.reportedIn(elems[i], b.w.elemEnd(t.name, i))
		b.httpRule(i+1, elems[i], &els[i], reported)
	}
}
func (b *builder) httpRule(n, line int, el *httpRuleLeaves, reported bool) {
	ok := !reported
	var host entry
	switch {
	case el.host == nil && reported:
	case el.host == nil:
		b.c.add(line, "[[http]] rule %d has no host; add host = \"api.example.com\" (the name it applies to, or \"*.example.com\")", n)
		ok = false
	default:
		var problem string
		host, problem = parseHostOnly(el.host.value, "[[http]] rules apply on every port the name is allowed on")
		if problem != "" {
			b.c.add(el.host.line, "http host %q: %s", el.host.value, problem)
			ok = false
		}
	}
	r := httpRule{}
	switch {
	case el.action == nil && reported:
	case el.action == nil:
		b.c.add(line, "[[http]] rule %d has no action; add action = \"allow\" or action = \"deny\"", n)
		ok = false
	case el.action.value == "allow":
		r.allow = true
	case el.action.value == "deny":
	default:
		b.c.add(el.action.line, "http action %q: write \"allow\" or \"deny\" (in lower case)", el.action.value)
		ok = false
	}
	seen := map[string]leaf{}
	for _, m := range el.methods {
		up := strings.ToUpper(m.value)
		switch {
		case m.value == "":
			b.c.add(m.line, "http method \"\": the method is empty; write a method like \"GET\", or remove the entry")
			ok = false
		case !isToken(m.value):
			b.c.add(m.line, "http method %q: a method is an HTTP token (letters, digits and !#$%%&'*+-.^_`|~, no spaces or commas), like \"GET\"; write one method per string", m.value)
			ok = false
		case seen[up].line > 0:
			b.c.add(m.line, "http method %q repeats %q on line %d (methods ignore case); remove one of them", m.value, seen[up].value, seen[up].line)
			ok = false
		default:
			seen[up] = m
			r.methods = append(r.methods, up)
		}
	}
	seen = map[string]leaf{}
	for _, pl := range el.paths {
		if problem := checkPathPattern(pl.value); problem != "" {
			b.c.add(pl.line, "http path %q: %s", pl.value, problem)
			ok = false
			continue
		}
		if prev, dup := seen[pl.value]; dup {
			b.c.add(pl.line, "http path %q repeats %q on line %d; remove one of them", pl.value, prev.value, prev.line)
			ok = false
			continue
		}
		seen[pl.value] = pl
		r.paths = append(r.paths, pl.value)
	}
	if !ok {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "http[%d] (line %d) host=%s", n, line, el.host.value)
	if len(el.methods) > 0 {
		sb.WriteString(" methods=")
		for i, m := range el.methods {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(m.value)
		}
	}
	if len(r.paths) > 0 {
		sb.WriteString(" paths=" + strings.Join(r.paths, ","))
	}
	sb.WriteString(" action=" + el.action.value)
	r.text = sb.String()

	idx := len(b.p.http)
	b.p.http = append(b.p.http, r)
	if host.wildcard {
		b.p.httpWild[host.base] = append(b.p.httpWild[host.base], idx)
	} else {
		b.p.httpExact[host.base] = append(b.p.httpExact[host.base], idx)
	}
	b.httpHosts = append(b.httpHosts, hostEntry{e: host, text: el.host.value, line: el.host.line})
}

// maxPathPattern caps the length of a paths entry.
const maxPathPattern = 2048

// checkPathPattern returns what is wrong with a paths entry, or "".
func checkPathPattern(s string) string {
	switch {
	case s == "":
		return "the pattern is empty; write a path like \"/repos/*\", or remove the entry"
	case strings.Contains(s, "://"):
		return "this looks like a URL; write only the path, like \"/repos/*\" (the name goes in host)"
	case s[0] != '/':
		return "a path pattern starts with \"/\", like \"/repos/*\""
	case len(s) > maxPathPattern:
		return fmt.Sprintf("the pattern is %d characters long; write at most %d (\"*\" matches any run of characters)", len(s), maxPathPattern)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isUnreserved(c) || strings.IndexByte("!$&'()*+,;=:@/", c) >= 0:
		case c == '?':
			return "paths are matched without the query string; remove \"?\" and what follows"
		case c == '#':
			return "a fragment (\"#…\") is never sent to the server; remove it"
		case c == '%':
			return "write characters, not percent-escapes: request paths are matched after decoding the escapes of letters, digits and \"-._~\"; use \"*\" in place of other characters"
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			return "the pattern contains whitespace, which a request path never does; use \"*\" in its place, or write one pattern per string"
		default:
			return fmt.Sprintf("the character %q cannot appear unencoded in a request path; use \"*\" in its place", string(rune(c)))
		}
	}
	if c := cleanPath(s); c != s {
		return fmt.Sprintf("the pattern is not in clean form (it has a \"//\", \".\" or \"..\" segment) and would never match, since request paths are cleaned before matching; write %q", c)
	}
	return ""
}
