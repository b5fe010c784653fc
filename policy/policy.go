package policy

// Reasons carried by Decision.Reason. They are stable, machine-friendly
// strings meant for logs and the event store.
const (
	ReasonAllowed        = "allowed"          // an allow entry matched and no deny entry did
	ReasonDeniedByRule   = "denied-by-rule"   // a deny entry matched (deny wins over allow)
	ReasonNoMatchingRule = "no-matching-rule" // no entry names this host: default deny
	ReasonPortNotAllowed = "port-not-allowed" // the host is allowed, but on other ports only
	ReasonInvalidName    = "invalid-name"     // the name is not a valid DNS host name
	// ReasonSecretWrongHost: the name holds a secret's placeholder (a
	// valid DNS label), which would carry it to resolvers and upstreams
	// that are not the secret's; Rule names the secret. The MITM refuses
	// requests for the same reason, under the same name.
	ReasonSecretWrongHost = "secret-wrong-host"
)

// Policy is a parsed policy file. It is immutable after Parse (or Load, or
// DenyAll) returns it, so all of its methods are safe for concurrent use.
// A nil *Policy denies everything, like DenyAll.
type Policy struct {
	// exact holds the rules of exact names, keyed by canonical name.
	exact map[string]*node
	// wild holds the rules of "*.x" patterns, keyed by canonical x.
	wild map[string]*node

	allowText []string // allow entries as written, in file order
	denyText  []string // deny entries as written, in file order

	resolve map[string]Target // keyed by canonical name

	// http holds the [[http]] rules in file order; httpExact and httpWild
	// index them by host pattern like exact and wild (the lists ascend).
	http      []httpRule
	httpExact map[string][]int
	httpWild  map[string][]int

	// passExact and passWild hold the [tls] passthrough entries as written,
	// keyed like exact and wild.
	passExact map[string]string
	passWild  map[string]string

	previewSet   bool // [mitm] preview_bytes was written
	previewBytes int

	maxWildcardNames int // [dns] max_wildcard_names; 0: the default

	secrets []*Secret // [[secret]] tables, then --secret flags
	dlp     DLP       // [dlp]; Action "" when absent

	mcpShowDenied bool        // [mcp] hide_denied = false
	mcpRules      []mcpRule   // [[mcp.rules]], in file order
	mcpServers    []MCPServer // [mcp.servers.NAME], sorted by Name

	quicBlock bool // [quic] mode = "block"

	netAsk askRule // [network] unknown, ask_timeout
	mcpAsk askRule // [mcp] unknown, ask_timeout

	grants Grants // what WithGrants added, in the order added

	proxy *Proxy // [upstream] proxy; nil: upstream connections go direct

	forwards    map[forwardKey]Forward // [[forward]], by name and port
	forwardList []Forward              // the same, in file order

	// AllowPrivate is [upstream] allow_private: whether a host-name resolve
	// target (Target.Pinned false) may resolve to a private, loopback or
	// link-local address. Pinned targets are the operator's explicit choice
	// and are not subject to this check.
	AllowPrivate bool
	// CAFiles are the [upstream] ca_files, extra roots for verifying upstream
	// TLS. Relative paths in the file are made relative to the directory of
	// the policy file (absolute for Load). UpstreamCAFiles returns a copy.
	CAFiles []string
	// Source is the path of the policy file (absolute for Load, the name
	// given to Parse, "" for DenyAll).
	Source string
	// SHA256 is the hex SHA-256 of the policy file's bytes ("" for DenyAll),
	// or, once WithGrants laid grants over it, of that hash and the grants.
	SHA256 string
	// baseSHA256 is the file's hash when SHA256 includes grants.
	baseSHA256 string
}

// node holds the rules attached to one pattern (an exact name or the base of
// a wildcard).
type node struct {
	allow []rule // ports are always set (443 when none was written)
	deny  []rule // port 0: every port (and DNS)
}

type rule struct {
	text string // the entry as written
	port uint16
}

// Decision is the answer to DecideName, DecideFlow, DecideHTTP or
// DecideMCPTool.
type Decision struct {
	// Allowed is true only when an allow entry matched and no deny entry did
	// (for DecideHTTP: and no [[http]] rule denied the request).
	Allowed bool
	// Rule is the entry that decided, as written in the policy file, e.g.
	// "*.githubusercontent.com" or "example.test:8080": the allow entry when
	// allowed, the deny entry when denied by rule, the allow entry that
	// names the host on another port for port-not-allowed, "" otherwise.
	// An [[http]] rule is named by its number and line, then its keys:
	// "http[2] (line 14) host=api.github.com methods=GET,HEAD paths=/repos/*
	// action=deny", an [[mcp.rules]] rule likewise: "mcp.rules[2] (line 16)
	// server=mcp.example.com tools=read_* action=deny". The MCP gateway's
	// name, allowed while [mcp.servers] has a server, is "[mcp.servers]".
	Rule string
	// Reason is one of the Reason constants.
	Reason string
	// Ask is set on a denial no rule made (ReasonNoMatchingRule,
	// ReasonPortNotAllowed) when the policy says to ask a person about
	// what it did not foresee ([network] unknown = "ask", [mcp] unknown =
	// "ask"): the caller holds the query, connection or call and asks.
	Ask bool
}

// Target is where capsem really connects for a name ([upstream] resolve).
type Target struct {
	// Host is a literal IP address (Pinned) or a canonical host name that the
	// caller resolves on the host; the caller must then refuse private
	// addresses unless Policy.AllowPrivate. IPv6 addresses are written
	// without brackets: use net.JoinHostPort.
	Host string
	// Port is the port to connect to; 0 keeps the port the guest dialed.
	Port uint16
	// Pinned is true when Host is a literal IP address chosen by the
	// operator.
	Pinned bool
}

// DenyAll returns the built-in empty policy: every name and flow is denied
// with ReasonNoMatchingRule.
func DenyAll() *Policy {
	return &Policy{}
}

// usable reports whether p can be consulted; a nil Policy denies all.
func (p *Policy) usable() bool { return p != nil }

// DecideName is the DNS view of the policy: may fake DNS answer name?
//
// It is allowed when some allow entry matches the name on some port and that
// port is not denied for the name. A deny entry without a port that matches
// the name denies it outright. Names are matched case-insensitively and a
// trailing dot is ignored; a name that is not a valid host name is denied
// with ReasonInvalidName, and one holding a secret's placeholder with
// ReasonSecretWrongHost (also by DecideFlow).
func (p *Policy) DecideName(name string) Decision {
	canon, d, decided := p.screenName(name)
	if decided {
		return d
	}
	if rule := p.forwardedName(canon); rule != "" {
		return Decision{Allowed: true, Rule: rule, Reason: ReasonForwarded}
	}
	var firstAllow string
	portDenies := false
	for n := range p.matches(canon) {
		for i := range n.deny {
			if n.deny[i].port == 0 {
				return Decision{Rule: n.deny[i].text, Reason: ReasonDeniedByRule}
			}
			portDenies = true
		}
		if firstAllow == "" && len(n.allow) > 0 {
			firstAllow = n.allow[0].text
		}
	}
	if firstAllow == "" {
		return p.unforeseen("", ReasonNoMatchingRule)
	}
	if !portDenies {
		return Decision{Allowed: true, Rule: firstAllow, Reason: ReasonAllowed}
	}
	// Some ports are denied: the name is allowed only if an allowed port
	// survives them.
	var denyRule string
	for n := range p.matches(canon) {
		for i := range n.allow {
			d := p.portDeny(canon, n.allow[i].port)
			if d == "" {
				return Decision{Allowed: true, Rule: n.allow[i].text, Reason: ReasonAllowed}
			}
			if denyRule == "" {
				denyRule = d
			}
		}
	}
	return Decision{Rule: denyRule, Reason: ReasonDeniedByRule}
}

// screenName is what DecideName and DecideFlow decide before any rule: a
// name that is not a valid host name, a nil policy, a name that holds a
// secret's placeholder. decided is false when the rules must decide; canon
// is then the canonical name.
func (p *Policy) screenName(name string) (canon string, d Decision, decided bool) {
	canon, ok := Canonical(name)
	if !ok {
		return "", Decision{Reason: ReasonInvalidName}, true
	}
	if !p.usable() {
		return "", Decision{Reason: ReasonNoMatchingRule}, true
	}
	if s := p.secretInName(canon); s != "" {
		return "", Decision{Rule: s, Reason: ReasonSecretWrongHost}, true
	}
	return canon, Decision{}, false
}

// portDeny returns the deny entry that denies canon on port, or "".
func (p *Policy) portDeny(canon string, port uint16) string {
	for n := range p.matches(canon) {
		for i := range n.deny {
			if d := n.deny[i]; d.port == 0 || d.port == port {
				return d.text
			}
		}
	}
	return ""
}

// DecideFlow decides a connection from the guest to name on port.
//
// A [[forward]] table for the name and port allows it (ReasonForwarded),
// whatever [network] says: the flow goes to the table's host service only.
// A matching deny entry (without a port, or with this port) denies the flow,
// whatever the allow entries say. Otherwise an allow entry matching the name
// on exactly this port allows it. When the name is allowed on other ports
// only, the Reason is ReasonPortNotAllowed.
func (p *Policy) DecideFlow(name string, port uint16) Decision {
	canon, d, decided := p.screenName(name)
	if decided {
		return d
	}
	if f, ok := p.forwards[forwardKey{canon, port}]; ok {
		return Decision{Allowed: true, Rule: f.Rule, Reason: ReasonForwarded}
	}
	var allowRule, otherPort string
	for n := range p.matches(canon) {
		for i := range n.deny {
			if d := n.deny[i]; d.port == 0 || d.port == port {
				return Decision{Rule: d.text, Reason: ReasonDeniedByRule}
			}
		}
		if allowRule == "" {
			for i := range n.allow {
				if n.allow[i].port == port {
					allowRule = n.allow[i].text
					break
				}
			}
			if otherPort == "" && len(n.allow) > 0 {
				otherPort = n.allow[0].text
			}
		}
	}
	switch {
	case allowRule != "":
		return Decision{Allowed: true, Rule: allowRule, Reason: ReasonAllowed}
	case otherPort != "":
		return p.unforeseen(otherPort, ReasonPortNotAllowed)
	}
	return p.unforeseen("", ReasonNoMatchingRule)
}

// matches yields the nodes whose pattern matches the canonical name, most
// specific first: the exact name, then "*.<parent>" for each parent domain
// from the nearest to the top-level one. Each lookup is one map access, so a
// decision costs one lookup per label, whatever the number of rules.
func (p *Policy) matches(canon string) func(yield func(*node) bool) {
	return func(yield func(*node) bool) {
		if n := p.exact[canon]; n != nil {
			if !yield(n) {
				return
			}
		}
		if len(p.wild) == 0 {
			return
		}
		for i := 0; i < len(canon); i++ {
			if canon[i] != '.' {
				continue
			}
			if n := p.wild[canon[i+1:]]; n != nil {
				if !yield(n) {
					return
				}
			}
		}
	}
}

// Resolve returns the [upstream] resolve entry for name, if there is one.
// name is matched like in the decisions (case-insensitive, trailing dot
// ignored). Resolve does not decide anything: call DecideFlow first.
func (p *Policy) Resolve(name string) (Target, bool) {
	if !p.usable() || len(p.resolve) == 0 {
		return Target{}, false
	}
	canon, ok := Canonical(name)
	if !ok {
		return Target{}, false
	}
	t, ok := p.resolve[canon]
	return t, ok
}

// Rules returns the allow and deny entries as written in the file, in file
// order, for logging. The slices are copies.
func (p *Policy) Rules() (allow, deny []string) {
	if !p.usable() {
		return nil, nil
	}
	return append([]string(nil), p.allowText...), append([]string(nil), p.denyText...)
}
