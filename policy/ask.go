package policy

import "time"

// What a policy does with what no rule names ([network] unknown, [mcp]
// unknown).
const (
	UnknownDeny  = "deny"  // refuse it: [network]'s default
	UnknownAsk   = "ask"   // hold it and ask a person (capsem ask, the API, capsem ui)
	UnknownAllow = "allow" // [mcp] only, its default: a tool no rule names is called
)

// DefaultAskTimeout is how long a question waits for its answer when the
// file sets no ask_timeout: long enough for a person to read a name and
// choose, short enough that a client's own timeout (curl's connect
// timeout is 300 s, pip's 15 s per try) rarely fires first.
const DefaultAskTimeout = 60 * time.Second

// MaxAskTimeout is the longest ask_timeout a file may set, in seconds.
const MaxAskTimeout = 600

// askRule is the part of a table about what no rule names.
type askRule struct {
	mode    string        // UnknownDeny, UnknownAsk or UnknownAllow; "": the table's default
	timeout time.Duration // 0: DefaultAskTimeout
}

// askTable builds the unknown and ask_timeout keys of t ([network] or
// [mcp]) into r; modes are the values unknown may take.
func (b *builder) askTable(t *table, r *askRule, modes ...string) {
	for k, l := range b.w.values(t) {
		if k.name != "unknown" {
			continue
		}
		ok := false
		for _, m := range modes {
			ok = ok || l.value == m
		}
		if !ok {
			b.c.add(l.line, "%s.unknown = %q: write %s (what happens to what no rule names: %s)", t.name, l.value, quoteList(modes), unknownMeaning(modes))
			continue
		}
		r.mode = l.value
	}
	if n, ok := b.limit(t, "ask_timeout", MaxAskTimeout, t.name+".ask_timeout = %d: write the seconds a question waits for its answer, from 1 to %d, or 0 for the default (60)", MaxAskTimeout); ok {
		r.timeout = time.Duration(n) * time.Second
	}
}

func quoteList(modes []string) string {
	out := ""
	for i, m := range modes {
		switch {
		case i == 0:
		case i == len(modes)-1:
			out += " or "
		default:
			out += ", "
		}
		out += `"` + m + `"`
	}
	return out
}

func unknownMeaning(modes []string) string {
	out := ""
	for i, m := range modes {
		if i > 0 {
			out += "; "
		}
		switch m {
		case UnknownDeny:
			out += "deny refuses it"
		case UnknownAsk:
			out += "ask holds it and asks a person (capsem ask NAME)"
		case UnknownAllow:
			out += "allow lets it through"
		}
	}
	return out
}

// AskNetwork reports whether [network] unknown = "ask": a name or port no
// entry names is held while a person is asked (DecideName and DecideFlow
// set Decision.Ask).
func (p *Policy) AskNetwork() bool { return p.usable() && p.netAsk.mode == UnknownAsk }

// NetworkAskTimeout is [network] ask_timeout: how long a held query or
// connection waits for its answer.
func (p *Policy) NetworkAskTimeout() time.Duration { return p.netAsk.timeoutOr() }

// MCPUnknown is [mcp] unknown: UnknownAllow (the default), UnknownDeny or
// UnknownAsk.
func (p *Policy) MCPUnknown() string {
	if !p.usable() || p.mcpAsk.mode == "" {
		return UnknownAllow
	}
	return p.mcpAsk.mode
}

// MCPAskTimeout is [mcp] ask_timeout: how long a held tools/call waits
// for its answer.
func (p *Policy) MCPAskTimeout() time.Duration {
	if !p.usable() {
		return DefaultAskTimeout
	}
	return p.mcpAsk.timeoutOr()
}

func (r askRule) timeoutOr() time.Duration {
	if r.timeout == 0 {
		return DefaultAskTimeout
	}
	return r.timeout
}

// unforeseen is the decision on what no rule names: reason (no-matching-rule
// or port-not-allowed) with Ask set when [network] unknown = "ask".
func (p *Policy) unforeseen(rule, reason string) Decision {
	return Decision{Rule: rule, Reason: reason, Ask: p.netAsk.mode == UnknownAsk}
}
