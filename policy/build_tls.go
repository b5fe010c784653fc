package policy

import "strings"

// passthrough builds the entries of [tls] passthrough.
func (b *builder) passthrough(t *table) {
	for k, l := range b.w.values(t) {
		if k.name == "passthrough" {
			b.passthroughEntry(*l)
		}
	}
}

func (b *builder) passthroughEntry(l leaf) {
	e, problem := parseHostOnly(l.value, "passthrough applies on every port the name is allowed on")
	if problem != "" {
		b.c.add(l.line, "passthrough entry %q: %s", l.value, problem)
		return
	}
	if b.pass == nil {
		b.pass = map[string]leaf{}
		b.p.passExact = map[string]string{}
		b.p.passWild = map[string]string{}
	}
	if prev, ok := b.pass[e.pattern]; ok {
		b.c.add(l.line, "passthrough entry %q repeats %q on line %d; remove one of them", l.value, prev.value, prev.line)
		return
	}
	b.pass[e.pattern] = l
	if e.wildcard {
		b.p.passWild[e.base] = l.value
	} else {
		b.p.passExact[e.base] = l.value
	}
	b.passList = append(b.passList, hostEntry{e: e, text: l.value, line: l.line})
}

// passthroughConflicts reports passthrough entries that cover a host of an
// [[http]] rule: its requests would never be seen.
func (b *builder) passthroughConflicts(*table) {
	for _, pe := range b.passList {
		for _, he := range b.httpHosts {
			if overlap(pe.e, he.e) {
				b.c.add(pe.line, "passthrough entry %q covers names of the [[http]] rule whose host is %q (line %d): passthrough traffic is not decrypted, so that rule could not apply; remove one of them", pe.text, he.text, he.line)
				break
			}
		}
	}
}

// overlap reports whether some name matches both patterns.
func overlap(a, b entry) bool {
	below := func(name, base string) bool { return strings.HasSuffix(name, "."+base) }
	switch {
	case !a.wildcard && !b.wildcard:
		return a.base == b.base
	case !a.wildcard:
		return below(a.base, b.base)
	case !b.wildcard:
		return below(b.base, a.base)
	}
	return a.base == b.base || below(a.base, b.base) || below(b.base, a.base)
}
