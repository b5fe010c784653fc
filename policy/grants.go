package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Grants are what a person allowed when capsem asked about something the
// policy did not foresee (capsem ask, the API, capsem ui): allow entries
// the policy in force carries on top of its file. WithGrants lays them
// over a policy.
type Grants struct {
	// Network are allow entries as [network] allow writes them: "name"
	// (port 443), "name:port", "*.name".
	Network []string `json:"network,omitempty"`
	// MCP are tools allowed on a server.
	MCP []MCPGrant `json:"mcp,omitempty"`
}

// MCPGrant allows one tool of one MCP server.
type MCPGrant struct {
	Server string `json:"server"` // the NAME of an [mcp.servers.NAME] table, or a host
	Tool   string `json:"tool"`   // the tool's name, matched exactly (a "*" in it is a "*")
}

// GrantRule starts the Decision.Rule of a decision a grant made, as in
// "asked: pypi.org": the events say that a person, not the file, allowed it.
const GrantRule = "asked: "

// Empty reports whether g grants nothing.
func (g Grants) Empty() bool { return len(g.Network) == 0 && len(g.MCP) == 0 }

// Union is g with what o adds, without repeats, g's first.
func (g Grants) Union(o Grants) Grants {
	out := Grants{Network: slices.Clone(g.Network), MCP: slices.Clone(g.MCP)}
	for _, e := range o.Network {
		if !slices.Contains(out.Network, e) {
			out.Network = append(out.Network, e)
		}
	}
	for _, m := range o.MCP {
		if !slices.Contains(out.MCP, m) {
			out.MCP = append(out.MCP, m)
		}
	}
	return out
}

// Entries are g's grants in words: the network entries, then each MCP
// grant as "server=NAME tools=TOOL".
func (g Grants) Entries() []string {
	var out []string
	out = append(out, g.Network...)
	for _, m := range g.MCP {
		out = append(out, m.entry())
	}
	return out
}

func (m MCPGrant) entry() string { return "server=" + m.Server + " tools=" + m.Tool }

// CheckEntry says what is wrong with s as a [network] allow entry, or
// nil: what WithGrants and a policy file accept.
func CheckEntry(s string) error {
	if _, problem := parseEntry(s); problem != "" {
		return fmt.Errorf("policy: entry %q: %s", s, problem)
	}
	return nil
}

// Grants returns what WithGrants laid over p, in the order added.
func (p *Policy) Grants() Grants {
	if !p.usable() {
		return Grants{}
	}
	return Grants{}.Union(p.grants)
}

// WithGrants returns p with g's entries allowed, p unchanged. A network
// entry is an allow entry after the file's (a deny entry of the file still
// wins over it); an MCP grant is an [[mcp.rules]] allow rule after the
// file's (the first rule that matches still decides). Decisions a grant
// makes name it GrantRule + the entry. SHA256 becomes the hash of p's and
// every grant, so that the policy in force tells itself from the file's.
// An entry that is not a valid allow entry is an error naming it; what p
// already grants is skipped.
func (p *Policy) WithGrants(g Grants) (*Policy, error) {
	if !p.usable() {
		p = DenyAll()
	}
	g = Grants{}.Union(g) // no repeats within g
	q := *p
	q.exact, q.wild = maps.Clone(p.exact), maps.Clone(p.wild)
	if q.exact == nil {
		q.exact = map[string]*node{}
	}
	if q.wild == nil {
		q.wild = map[string]*node{}
	}
	q.grants = p.Grants()
	var errs []error
	for _, text := range g.Network {
		if slices.Contains(q.grants.Network, text) {
			continue
		}
		e, problem := parseEntry(text)
		if problem != "" {
			errs = append(errs, fmt.Errorf("allowed entry %q: %s", text, problem))
			continue
		}
		port := e.port
		if port == 0 {
			port = DefaultPort
		}
		m := q.exact
		if e.wildcard {
			m = q.wild
		}
		n := &node{}
		if old := m[e.base]; old != nil {
			n.allow, n.deny = slices.Clone(old.allow), old.deny
		}
		n.allow = append(n.allow, rule{text: GrantRule + text, port: port})
		m[e.base] = n
		q.grants.Network = append(q.grants.Network, text)
	}
	for _, mg := range g.MCP {
		if slices.Contains(q.grants.MCP, mg) {
			continue
		}
		r, err := p.grantRule(mg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		q.mcpRules = append(slices.Clip(q.mcpRules), r)
		q.grants.MCP = append(q.grants.MCP, mg)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if !q.grants.Empty() {
		h := sha256.New()
		h.Write([]byte(p.fileSHA256()))
		for _, e := range q.grants.Network {
			h.Write([]byte("\nnetwork " + e))
		}
		for _, m := range q.grants.MCP {
			h.Write([]byte("\nmcp " + m.Server + " " + m.Tool))
		}
		q.SHA256 = hex.EncodeToString(h.Sum(nil))
		q.baseSHA256 = p.fileSHA256()
	}
	return &q, nil
}

// fileSHA256 is the hash of the policy file alone, grants or not.
func (p *Policy) fileSHA256() string {
	if p.baseSHA256 != "" {
		return p.baseSHA256
	}
	return p.SHA256
}

// grantRule is the [[mcp.rules]] allow rule of mg.
func (p *Policy) grantRule(mg MCPGrant) (mcpRule, error) {
	r := mcpRule{allow: true, tools: []string{mg.Tool}, exact: true, text: GrantRule + mg.entry()}
	if mg.Tool == "" || strings.ContainsAny(mg.Tool, "\x00\n") {
		return r, fmt.Errorf("allowed MCP tool %q of %q: write the tool's name", mg.Tool, mg.Server)
	}
	if _, ok := p.MCPServer(mg.Server); ok {
		r.name = mg.Server
		return r, nil
	}
	host, problem := parseHostOnly(mg.Server, "an MCP grant applies on every port the host is allowed on")
	if problem != "" {
		return r, fmt.Errorf("allowed MCP server %q: it is no [mcp.servers.NAME] of the policy, and as a host: %s", mg.Server, problem)
	}
	r.host = host
	return r, nil
}
