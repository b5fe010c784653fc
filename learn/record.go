package learn

import (
	"cmp"
	"slices"
	"strings"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/mitm"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// The kinds of decision a Record holds.
const (
	KindDNS     = "dns"     // may the guest resolve Name?
	KindFlow    = "flow"    // may it connect to Name:Port?
	KindRequest = "request" // may it send Method Path to Name?
	KindMCP     = "mcp"     // may it call Tool on MCP server Name?
)

// Key is one question a policy answers.
type Key struct {
	Kind   string
	Name   string // the host name, or the MCP server
	Port   uint16 // flows
	Method string // requests
	Path   string // requests: the path as recorded (decoded)
	Tool   string // MCP
}

// Seen is one Key as the sessions saw it decided one way.
type Seen struct {
	Key
	Allowed bool
	Events  int64  // how many events it stands for
	Reason  string // the first event's reason
	Rule    string // the first event's matched rule
}

// Record is what sessions' policies decided, by question and outcome.
type Record struct {
	Sessions []string
	Events   int64 // every event read, decided by the policy or not
	seen     map[seenKey]*Seen
}

type seenKey struct {
	Key
	allowed bool
}

// policyReasons are the reasons of the events a policy decided, by kind;
// anything else (an upstream that failed, DLP, a full store) is what no
// policy change would undo.
var policyReasons = map[string][]string{
	KindDNS: {netstack.ReasonDNSAllowedName, netstack.ReasonDNSEmptyAnswer, netstack.ReasonDNSDeniedName,
		netstack.ReasonDNSInvalidName, netstack.ReasonDNSSecretInName},
	KindFlow: {policy.ReasonAllowed, policy.ReasonDeniedByRule, policy.ReasonNoMatchingRule, policy.ReasonPortNotAllowed,
		policy.ReasonForwarded},
	KindRequest: {policy.ReasonAllowed, mitm.ReasonHTTPDenied, policy.ReasonDeniedByRule, policy.ReasonNoMatchingRule,
		mitm.ReasonUpstreamError},
	KindMCP: {policy.ReasonAllowed, policy.ReasonMCPToolDenied, policy.ReasonNoMatchingRule},
}

// askReasons are a person's decisions and their absence, for every kind.
var askReasons = []string{ask.ReasonAllowed, ask.ReasonDenied, ask.ReasonTimeout, ask.ReasonUnanswered, ask.ReasonCapped}

func decidedByPolicy(kind, reason string) bool {
	return slices.Contains(policyReasons[kind], reason) || slices.Contains(askReasons, reason)
}

// NewRecord returns an empty Record.
func NewRecord() *Record { return &Record{seen: map[seenKey]*Seen{}} }

// Add counts ev, one event of session.
func (r *Record) Add(session string, ev store.Event) {
	if !slices.Contains(r.Sessions, session) {
		r.Sessions = append(r.Sessions, session)
	}
	r.Events++
	switch {
	case ev.DNS != nil:
		d := ev.DNS
		name, ok := policy.Canonical(d.QName)
		if !ok || !decidedByPolicy(KindDNS, d.Reason) {
			return
		}
		r.add(Key{Kind: KindDNS, Name: name}, d.Decision == store.Allowed, d.Count, d.Reason, d.MatchedRule)
	case ev.Net != nil:
		n := ev.Net
		name, ok := policy.Canonical(n.Domain)
		if !ok || n.Direction == store.Inbound {
			return
		}
		k := Key{Kind: KindFlow, Name: name, Port: n.Port}
		if n.Method != "" {
			if !strings.HasPrefix(n.Path, "/") {
				return // no [[http]] rule decides a request without a path ("OPTIONS *")
			}
			k = Key{Kind: KindRequest, Name: name, Method: n.Method, Path: n.Path}
		}
		if !decidedByPolicy(k.Kind, n.Reason) {
			return
		}
		r.add(k, n.Decision == store.Allowed, n.Count, n.Reason, n.MatchedRule)
	case ev.MCPCall != nil:
		m := ev.MCPCall
		if m.Method != "tools/call" || m.ToolName == "" || !decidedByPolicy(KindMCP, m.Reason) {
			return
		}
		r.add(Key{Kind: KindMCP, Name: m.ServerName, Tool: m.ToolName}, m.Decision == store.Allowed, 1, m.Reason, m.MatchedRule)
	}
}

func (r *Record) add(k Key, allowed bool, count int64, reason, rule string) {
	if count < 1 {
		count = 1
	}
	sk := seenKey{k, allowed}
	s := r.seen[sk]
	if s == nil {
		s = &Seen{Key: k, Allowed: allowed, Reason: reason, Rule: rule}
		r.seen[sk] = s
	}
	s.Events += count
}

// Seen lists what the sessions saw decided, by kind, name, then the rest.
func (r *Record) Seen() []Seen {
	out := make([]Seen, 0, len(r.seen))
	for _, s := range r.seen {
		out = append(out, *s)
	}
	kinds := []string{KindDNS, KindFlow, KindRequest, KindMCP}
	slices.SortFunc(out, func(a, b Seen) int {
		return cmp.Or(
			cmp.Compare(slices.Index(kinds, a.Kind), slices.Index(kinds, b.Kind)),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port),
			cmp.Compare(a.Method, b.Method), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Tool, b.Tool),
			boolOrder(a.Allowed, b.Allowed))
	})
	return out
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
