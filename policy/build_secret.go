package policy

import (
	"slices"
	"strings"
)

// secretLeaves are the values of one [[secret]] table.
type secretLeaves struct {
	name, fromEnv, fromFile, placeholder *leaf
	hosts, in                            []leaf
}

// secretLate builds the secrets, then checks their hosts.
func (b *builder) secretLate(t *table) {
	b.secretTables(t)
	b.secretConflicts(t)
	b.proxySecretLate()
}

// secretTables checks and builds the [[secret]] tables, then the --secret
// flags given to ParseWith, and allows each secret's hosts on port 443.
func (b *builder) secretTables(t *table) {
	elems := b.w.elems[t.name]
	els := make([]secretLeaves, len(elems))
	for k, l := range b.w.values(t) {
		e := &els[l.elem]
		switch k.name {
		case "name":
			e.name = l
		case "from_env":
			e.fromEnv = l
		case "from_file":
			e.fromFile = l
		case "placeholder":
			e.placeholder = l
		case "hosts":
			e.hosts = append(e.hosts, *l)
		case "in":
			e.in = append(e.in, *l)
		}
	}
	byName := map[string]*Secret{}
	for i := range els {
		reported := b.c.reportedIn(elems[i], b.w.elemEnd(t.name, i))
		if s := b.secretTable(i+1, elems[i], &els[i], reported); s != nil {
			if prev := byName[s.Name]; prev != nil {
				b.c.add(s.Line, "[[secret]] %s repeats the one on line %d; a name is one variable in the guest, declare it once", s.Name, prev.Line)
				continue
			}
			byName[s.Name] = s
			b.p.secrets = append(b.p.secrets, s)
		}
	}
	for i := range b.extraSecrets {
		s := b.extraSecrets[i]
		if prev := byName[s.Name]; prev != nil {
			b.c.add(prev.Line, "--secret %s: this file's [[secret]] %s already declares it; drop the flag or the table", s.Name, s.Name)
			continue
		}
		byName[s.Name] = &s
		b.p.secrets = append(b.p.secrets, &s)
	}
	for _, s := range b.p.secrets {
		b.allowSecretHosts(s)
	}
}

func (b *builder) secretTable(n, line int, el *secretLeaves, reported bool) *Secret {
	s := &Secret{Line: line}
	ok := !reported
	switch {
	case el.name == nil && reported:
	case el.name == nil:
		b.c.add(line, "[[secret]] %d has no name; add name = \"API_KEY\" (the environment variable the guest sees)", n)
		ok = false
	case !envName.MatchString(el.name.value):
		b.c.add(el.name.line, "secret name %q: write an environment variable name (letters, digits and _, not starting with a digit)", el.name.value)
		ok = false
	default:
		s.Name = el.name.value
	}
	switch {
	case el.fromEnv != nil && el.fromFile != nil:
		b.c.add(el.fromFile.line, "[[secret]] %d has both from_env and from_file; keep the one the real value comes from", n)
		ok = false
	case el.fromEnv != nil:
		if !envName.MatchString(el.fromEnv.value) {
			b.c.add(el.fromEnv.line, "secret from_env %q: write the name of a host environment variable (letters, digits and _)", el.fromEnv.value)
			ok = false
		}
		s.FromEnv = el.fromEnv.value
	case el.fromFile != nil:
		f, problem := b.secretFile(el.fromFile.value)
		if problem != "" {
			b.c.add(el.fromFile.line, "secret from_file %q: %s", el.fromFile.value, problem)
			ok = false
		}
		s.FromFile = f
	case !reported:
		b.c.add(line, "[[secret]] %d says nowhere where its real value is; add from_env = \"VAR\" (a host environment variable) or from_file = \"path\" (its first line)", n)
		ok = false
	}
	// The proxy's secret goes to the proxy alone: it needs no hosts.
	proxyOnly := b.proxySecret != nil && el.name != nil && el.name.value == b.proxySecret.value
	if len(el.hosts) == 0 && !reported && !proxyOnly {
		b.c.add(line, "[[secret]] %d has no hosts; add hosts = [\"api.example.com\"], the only hosts that may receive the real value", n)
		ok = false
	}
	seen := map[string]leaf{}
	for _, h := range el.hosts {
		e, problem := parseHostOnly(h.value, "the real value goes to the host on port 443")
		if problem != "" {
			b.c.add(h.line, "secret host %q: %s", h.value, problem)
			ok = false
			continue
		}
		if prev, dup := seen[e.pattern]; dup {
			b.c.add(h.line, "secret host %q repeats %q on line %d; remove one of them", h.value, prev.value, prev.line)
			ok = false
			continue
		}
		seen[e.pattern] = h
		e.line = h.line
		s.Hosts = append(s.Hosts, h.value)
		s.hosts = append(s.hosts, e)
	}
	inSeen := map[string]bool{}
	for _, l := range el.in {
		switch {
		case !slices.Contains(SecretInParts, l.value):
			b.c.add(l.line, "secret in %q: write \"header\", \"query\", \"path\" or \"body\" — the parts of a request to the secret's hosts where the placeholder is replaced", l.value)
			ok = false
		case inSeen[l.value]:
			b.c.add(l.line, "secret in %q is listed twice; remove one", l.value)
			ok = false
		default:
			inSeen[l.value] = true
			s.In = append(s.In, l.value)
		}
	}
	if p := el.placeholder; p != nil {
		switch {
		case len(p.value) < minPlaceholderBytes:
			b.c.add(p.line, "secret placeholder %q: write at least %d characters (a short one turns up in ordinary traffic), or remove it to get a new random one each session", p.value, minPlaceholderBytes)
			ok = false
		case strings.ContainsFunc(p.value, func(r rune) bool { return r <= ' ' || r > '~' }):
			b.c.add(p.line, "secret placeholder %q: use printable ASCII without spaces: it goes in headers and URLs", p.value)
			ok = false
		default:
			s.Placeholder = p.value
		}
	}
	if !ok {
		return nil
	}
	return s
}

// secretFile resolves a from_file path: "~/" is the user's home, a relative
// path is relative to the policy file's directory.
func (b *builder) secretFile(f string) (string, string) {
	return b.hostPath(f, "the path is empty; write the path of the file whose first line is the real value")
}

// allowSecretHosts allows each host of s on port 443, unless an allow
// entry of the same pattern does already: the secret is useless without
// reaching its hosts, and writing them twice is a chance to get one wrong.
func (b *builder) allowSecretHosts(s *Secret) {
	for _, e := range s.hosts {
		st := b.state(e.pattern)
		if _, ok := st.allow[DefaultPort]; ok {
			continue
		}
		text := e.text + " (secret " + s.Name + ")"
		st.allow[DefaultPort] = leaf{value: text, line: e.line}
		n := b.node(e)
		n.allow = append(n.allow, rule{text: text, port: DefaultPort})
		b.p.allowText = append(b.p.allowText, text)
	}
}

// secretConflicts reports a secret's host that [network] deny denies on
// port 443 or that [tls] passthrough covers: the real value could never be
// put in (passthrough is not decrypted) or never sent.
func (b *builder) secretConflicts(*table) {
	for _, s := range b.p.secrets {
		for _, e := range s.hosts {
			at := e.line
			if st := b.pats[e.pattern]; st != nil {
				d := st.denyAll
				if dp, ok := st.denyPorts[DefaultPort]; ok && d == nil {
					d = &dp
				}
				if d != nil {
					if at == 0 {
						at = d.line
					}
					b.c.add(at, "%s: host %q is denied by deny entry %q on line %d; remove one of them", s.where(), e.text, d.value, d.line)
				}
			}
			for _, pe := range b.passList {
				if overlap(pe.e, e) {
					if at == 0 {
						at = pe.line
					}
					b.c.add(at, "%s: host %q is under [tls] passthrough entry %q (line %d), which capsem does not decrypt, so the placeholder could never be replaced; remove the host from one of them", s.where(), e.text, pe.text, pe.line)
				}
			}
		}
	}
}
