package policy

import (
	"path/filepath"
	"strings"
)

// upstream builds [upstream].
func (b *builder) upstream(t *table) {
	b.p.AllowPrivate, _ = b.cfg.boolAt(t, "allow_private")
	b.proxy(t)
	for k, l := range b.w.values(t) {
		switch k.name {
		case "ca_files":
			if f := b.caFile(*l); f != "" {
				b.p.CAFiles = append(b.p.CAFiles, f)
				b.caLines = append(b.caLines, l.line)
			}
		case "resolve":
			b.resolve(*l)
		}
	}
}

func (b *builder) resolve(l leaf) {
	key := l.path[2]
	switch {
	case strings.ContainsRune(key, '*'):
		b.c.add(l.keyLine, "resolve key %q: keys must be exact host names, not wildcards; add one key per name", key)
		return
	case isIPLiteral(key):
		b.c.add(l.keyLine, "resolve key %q: keys are the host names the guest uses, not IP addresses; write the name, like \"api.example.com\"", key)
		return
	}
	canon, np, at := checkName(key)
	if np != nameOK {
		b.c.add(l.keyLine, "resolve key %q: %s", key, describeNameProblem(key, np, at))
		return
	}
	if numericTLD(canon) {
		b.c.add(l.keyLine, "resolve key %q: keys are the host names the guest uses, not IP addresses; write the name, like \"api.example.com\"", key)
		return
	}
	if b.resKeys == nil {
		b.resKeys = map[string]leaf{}
	}
	if prev, ok := b.resKeys[canon]; ok {
		b.c.add(l.keyLine, "resolve key %q names the same host as %q on line %d (names ignore case and a trailing dot); remove one of them", key, prev.path[2], prev.keyLine)
		return
	}
	b.resKeys[canon] = l
	t, problem := parseTarget(l.value)
	if problem != "" {
		b.c.add(l.line, "resolve target %q for %q: %s", l.value, key, problem)
		return
	}
	b.p.resolve[canon] = t
}

func (b *builder) caFile(l leaf) string {
	f := l.value
	switch {
	case strings.TrimSpace(f) == "":
		b.c.add(l.line, "ca_files entry %q: the path is empty; write the path of a PEM file, or remove the entry", f)
		return ""
	case strings.ContainsRune(f, 0):
		b.c.add(l.line, "ca_files entry %q: the path contains a NUL byte; write the path of a PEM file", f)
		return ""
	case strings.HasPrefix(f, "~"):
		b.c.add(l.line, "ca_files entry %q: \"~\" is not expanded; write the full path, or a path relative to the policy file's directory", f)
		return ""
	}
	if !filepath.IsAbs(f) {
		f = filepath.Join(b.dir, f)
	}
	f = filepath.Clean(f)
	if b.cas == nil {
		b.cas = map[string]leaf{}
	}
	if prev, ok := b.cas[f]; ok {
		b.c.add(l.line, "ca_files entry %q repeats %q on line %d (both are %s); remove one of them", l.value, prev.value, prev.line, f)
		return ""
	}
	b.cas[f] = l
	return f
}
