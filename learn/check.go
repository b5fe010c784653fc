package learn

import (
	"fmt"
	"net/url"

	"github.com/capsem/capsem/policy"
)

// Change is a recorded decision a policy would make otherwise.
type Change struct {
	Seen
	Now policy.Decision // the policy's decision
}

// Decide is pol's decision on k.
func Decide(pol *policy.Policy, k Key) policy.Decision {
	switch k.Kind {
	case KindDNS:
		return pol.DecideName(k.Name)
	case KindFlow:
		return pol.DecideFlow(k.Name, k.Port)
	case KindRequest:
		return pol.DecideHTTP(k.Name, k.Method, escapedPath(k.Path))
	case KindMCP:
		return pol.DecideMCPTool(k.Name, k.Tool)
	}
	return policy.Decision{}
}

// escapedPath is a recorded path (decoded, r.URL.Path) as DecideHTTP
// takes it: percent-encoded as a client sends it.
func escapedPath(p string) string { return (&url.URL{Path: p}).EscapedPath() }

// Check replays rec's decisions against pol: what it would decide
// otherwise, in Seen's order.
func Check(pol *policy.Policy, rec *Record) []Change {
	var out []Change
	for _, s := range rec.Seen() {
		if d := Decide(pol, s.Key); d.Allowed != s.Allowed {
			out = append(out, Change{Seen: s, Now: d})
		}
	}
	return out
}

// String is the question in words: "dns pypi.org", "flow a.test:8080",
// "request GET a.test/path", "mcp github create_issue".
func (k Key) String() string {
	switch k.Kind {
	case KindFlow:
		return fmt.Sprintf("flow %s:%d", k.Name, k.Port)
	case KindRequest:
		return fmt.Sprintf("request %s %s%s", k.Method, k.Name, k.Path)
	case KindMCP:
		return fmt.Sprintf("mcp %s %s", k.Name, k.Tool)
	}
	return "dns " + k.Name
}

// String is the change in words, with the rule responsible.
func (c Change) String() string {
	was, now := "denied", "allowed"
	if c.Allowed {
		was, now = "allowed", "denied"
	}
	why := c.Now.Reason
	if c.Now.Rule != "" {
		why += " by " + c.Now.Rule
	}
	if c.Now.Ask {
		why += "; it would be asked"
	}
	return fmt.Sprintf("%s -> %s  %s  (%s; was %s%s; now %s)", was, now, c.Key, events(c.Events), c.Reason, ruleNote(c.Rule), why)
}

func ruleNote(rule string) string {
	if rule == "" {
		return ""
	}
	return " by " + rule
}
