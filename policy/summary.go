package policy

import (
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Summary is what a policy allows, as its file wrote it, for a person or a
// program to check before a sandbox exists (capsem start --dry-run).
type Summary struct {
	Source       string            `json:"source"` // the file ("default policy" for the built-in one)
	SHA256       string            `json:"sha256"`
	Allow        []string          `json:"allow"` // [network] allow entries: names, "*.x" patterns, ":port" suffixes
	Deny         []string          `json:"deny"`
	HTTP         []string          `json:"http_rules"`        // [[http]] rules, in file order, as a decision names them
	Passthrough  []string          `json:"tls_passthrough"`   // names whose TLS is not intercepted
	Resolve      map[string]string `json:"resolve,omitempty"` // [upstream] resolve: name → where capsem connects
	AllowPrivate bool              `json:"allow_private"`     // [upstream] allow_private
	CAFiles      []string          `json:"upstream_ca_files"` // [upstream] ca_files
	// Proxy is [upstream] proxy ("" for none), NoProxy its no_proxy,
	// ProxySecret the name of the secret of its credentials.
	Proxy        string   `json:"upstream_proxy,omitempty"`
	NoProxy      []string `json:"upstream_no_proxy,omitempty"`
	ProxySecret  string   `json:"upstream_proxy_secret,omitempty"`
	PreviewBytes int      `json:"mitm_preview_bytes"`     // [mitm] preview_bytes in force
	MaxWildcard  int      `json:"dns_max_wildcard_names"` // [dns] max_wildcard_names in force
	Secrets      []string `json:"secrets"`                // [[secret]] and --secret: NAME@host,… (never a value)
	DLP          string   `json:"dlp"`                    // [dlp] action in force, with its detectors when not all
	// MCPRules are the [[mcp.rules]], in file order, as a decision names
	// them.
	MCPRules []string `json:"mcp_rules"`
	// MCPServers are the [mcp.servers], by NAME: "github (command npx)",
	// "remote (url https://mcp.example.com/mcp)". Only the program and
	// the URL without its query: arguments, env, queries and headers may
	// hold credentials.
	MCPServers    []string `json:"mcp_servers"`
	MCPHideDenied bool     `json:"mcp_hide_denied"` // [mcp] hide_denied in force
	QUIC          string   `json:"quic"`            // [quic] mode in force: QUICIntercept or QUICBlock
	// Forwards are the [[forward]] tables, in file order: "forward
	// db.capsem.internal:5432 -> 127.0.0.1:5432".
	Forwards []string `json:"forwards"`
	// Unknown is [network] unknown in force (UnknownDeny or UnknownAsk),
	// MCPUnknown [mcp]'s; AskTimeoutS [network] ask_timeout in seconds.
	Unknown     string `json:"network_unknown"`
	MCPUnknown  string `json:"mcp_unknown"`
	AskTimeoutS int    `json:"ask_timeout_s"`
	// Asked are the grants laid over the file's policy (Grants.Entries).
	Asked []string `json:"asked"`
}

// Summarize describes p. Lists are never nil, so that JSON shows [].
func (p *Policy) Summarize() Summary {
	s := Summary{Allow: []string{}, Deny: []string{}, HTTP: []string{}, Passthrough: []string{}, CAFiles: []string{}, Secrets: []string{},
		MCPRules: []string{}, MCPServers: []string{}, MCPHideDenied: p.MCPHideDenied(), QUIC: p.QUICMode(), Forwards: []string{},
		Unknown: UnknownDeny, MCPUnknown: p.MCPUnknown(), AskTimeoutS: int(p.NetworkAskTimeout().Seconds()), Asked: []string{}}
	if p.AskNetwork() {
		s.Unknown = UnknownAsk
	}
	s.Asked = append(s.Asked, p.Grants().Entries()...)
	if !p.usable() {
		return s
	}
	for _, f := range p.forwardList {
		s.Forwards = append(s.Forwards, f.Rule)
	}
	s.Source, s.SHA256, s.AllowPrivate = p.Source, p.SHA256, p.AllowPrivate
	s.Allow = append(s.Allow, p.allowText...)
	s.Deny = append(s.Deny, p.denyText...)
	for i := range p.http {
		s.HTTP = append(s.HTTP, p.http[i].text)
	}
	for _, m := range []map[string]string{p.passExact, p.passWild} {
		for _, text := range m {
			s.Passthrough = append(s.Passthrough, text)
		}
	}
	sort.Strings(s.Passthrough)
	s.CAFiles = append(s.CAFiles, p.UpstreamCAFiles()...)
	if x := p.proxy; x != nil {
		s.Proxy, s.NoProxy, s.ProxySecret = x.URL, x.NoProxy, x.Secret
	}
	if len(p.resolve) > 0 {
		s.Resolve = map[string]string{}
		for name, t := range p.resolve {
			to := t.Host
			if t.Port != 0 {
				to = net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port)))
			}
			s.Resolve[name] = to
		}
	}
	s.PreviewBytes, s.MaxWildcard = p.PreviewBytes(), p.MaxWildcardNames()
	for _, sec := range p.Secrets() {
		s.Secrets = append(s.Secrets, sec.String())
	}
	d := p.DLP()
	s.DLP = d.Action
	if len(d.Detectors) > 0 {
		s.DLP += " (" + strings.Join(d.Detectors, ", ") + ")"
	}
	for i := range p.mcpRules {
		s.MCPRules = append(s.MCPRules, p.mcpRules[i].text)
	}
	for _, m := range p.mcpServers {
		if m.URL != "" {
			u, _ := url.Parse(m.URL) // checked by Parse
			s.MCPServers = append(s.MCPServers, m.Name+" (url "+u.Scheme+"://"+u.Host+u.EscapedPath()+")")
		} else {
			s.MCPServers = append(s.MCPServers, m.Name+" (command "+m.Command[0]+")")
		}
	}
	return s
}
