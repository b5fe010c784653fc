package policy

import (
	"sort"
)

// DefaultPort is the port an allow entry without ":port" allows.
const DefaultPort = 443

// network builds [network].
func (b *builder) network(t *table) {
	// All allow entries first, so that a deny entry can be checked against
	// them wherever it is in the file.
	for k, l := range b.w.values(t) {
		if k.name == "allow" {
			b.allow(*l)
		}
	}
	for k, l := range b.w.values(t) {
		switch k.name {
		case "default":
			if l.value != "deny" {
				b.c.add(l.line, "network.default = %q: capsem is default-deny and \"deny\" is the only accepted default; remove the key or set it to \"deny\", and list what the guest may reach in network.allow", l.value)
			}
		case "deny":
			b.deny(*l)
		}
	}
	b.askTable(t, &b.p.netAsk, UnknownDeny, UnknownAsk)
}

// patState tracks the entries seen for one pattern, to find repeats.
type patState struct {
	allow     map[uint16]leaf // by effective port
	denyAll   *leaf
	denyPorts map[uint16]leaf
}

func (b *builder) state(pattern string) *patState {
	if b.pats == nil {
		b.pats = map[string]*patState{}
	}
	st := b.pats[pattern]
	if st == nil {
		st = &patState{allow: map[uint16]leaf{}, denyPorts: map[uint16]leaf{}}
		b.pats[pattern] = st
	}
	return st
}

func (b *builder) node(e entry) *node {
	m := b.p.exact
	if e.wildcard {
		m = b.p.wild
	}
	n := m[e.base]
	if n == nil {
		n = &node{}
		m[e.base] = n
	}
	return n
}

func (b *builder) allow(l leaf) {
	e, problem := parseEntry(l.value)
	if problem != "" {
		b.c.add(l.line, "allow entry %q: %s", l.value, problem)
		return
	}
	port := e.port
	if port == 0 {
		port = DefaultPort
	}
	st := b.state(e.pattern)
	if prev, ok := st.allow[port]; ok {
		b.c.add(l.line, "allow entry %q repeats %q on line %d; remove one of them", l.value, prev.value, prev.line)
		return
	}
	st.allow[port] = l
	n := b.node(e)
	n.allow = append(n.allow, rule{text: l.value, port: port})
	b.p.allowText = append(b.p.allowText, l.value)
}

func (b *builder) deny(l leaf) {
	e, problem := parseEntry(l.value)
	if problem != "" {
		b.c.add(l.line, "deny entry %q: %s", l.value, problem)
		return
	}
	st := b.state(e.pattern)
	if e.port == 0 {
		if st.denyAll != nil {
			b.c.add(l.line, "deny entry %q repeats %q on line %d; remove one of them", l.value, st.denyAll.value, st.denyAll.line)
			return
		}
		for _, prev := range sortedLeaves(st.denyPorts) {
			b.c.add(prev.line, "deny entry %q is redundant: %q on line %d denies every port of the name; remove %q", prev.value, l.value, l.line, prev.value)
		}
		for _, a := range sortedLeaves(st.allow) {
			b.c.add(l.line, "deny entry %q cancels allow entry %q on line %d (deny wins); remove one of them", l.value, a.value, a.line)
		}
		st.denyAll = &l
	} else {
		if st.denyAll != nil {
			b.c.add(l.line, "deny entry %q is redundant: %q on line %d denies every port of the name; remove %q", l.value, st.denyAll.value, st.denyAll.line, l.value)
			return
		}
		if prev, ok := st.denyPorts[e.port]; ok {
			b.c.add(l.line, "deny entry %q repeats %q on line %d; remove one of them", l.value, prev.value, prev.line)
			return
		}
		if a, ok := st.allow[e.port]; ok {
			b.c.add(l.line, "deny entry %q cancels allow entry %q on line %d (deny wins); remove one of them", l.value, a.value, a.line)
		}
		st.denyPorts[e.port] = l
	}
	n := b.node(e)
	n.deny = append(n.deny, rule{text: l.value, port: e.port})
	b.p.denyText = append(b.p.denyText, l.value)
}

func sortedLeaves(m map[uint16]leaf) []leaf {
	out := make([]leaf, 0, len(m))
	for _, l := range m {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].line < out[j].line || out[i].line == out[j].line && out[i].index < out[j].index
	})
	return out
}
