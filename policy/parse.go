package policy

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// DefaultPort is the port an allow entry without ":port" allows.
const DefaultPort = 443

// maxErrors caps the number of problems one Parse reports.
const maxErrors = 50

// Error is one problem in a policy file. Its message starts with
// "file:line: " and says what to do about the problem. Parse returns a
// single *Error, or several joined with errors.Join (one per line of the
// error's text); errors.As finds the first.
type Error struct {
	File string // the name given to Parse, or the path given to Load
	Line int    // 1-based line of the offending key or value
	Msg  string // what is wrong and how to fix it (one line)
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// fileSchema is the shape of a policy file, for go-toml's strict decoder,
// which reports syntax errors, type errors, duplicate keys and unknown keys.
// Values are then re-read from the syntax tree together with their lines.
type fileSchema struct {
	Network *struct {
		Default *string  `toml:"default"`
		Allow   []string `toml:"allow"`
		Deny    []string `toml:"deny"`
	} `toml:"network"`
	Upstream *struct {
		Resolve      map[string]string `toml:"resolve"`
		CAFiles      []string          `toml:"ca_files"`
		AllowPrivate *bool             `toml:"allow_private"`
	} `toml:"upstream"`
	HTTP []struct {
		Host    *string  `toml:"host"`
		Methods []string `toml:"methods"`
		Paths   []string `toml:"paths"`
		Action  *string  `toml:"action"`
	} `toml:"http"`
	TLS *struct {
		Passthrough []string `toml:"passthrough"`
	} `toml:"tls"`
	MITM *struct {
		PreviewBytes *int64 `toml:"preview_bytes"`
	} `toml:"mitm"`
	DNS *struct {
		MaxWildcardNames *int64 `toml:"max_wildcard_names"`
	} `toml:"dns"`
}

// schemaKeys lists the keys of each table, in the order the docs give them.
var schemaKeys = map[string][]string{
	"":         {"network", "upstream", "http", "tls", "mitm", "dns"},
	"network":  {"default", "allow", "deny"},
	"upstream": {"resolve", "ca_files", "allow_private"},
	"http":     {"host", "methods", "paths", "action"},
	"tls":      {"passthrough"},
	"mitm":     {"preview_bytes"},
	"dns":      {"max_wildcard_names"},
}

// tableHeader is how table t is written: "[network]", or "[[http]]" for the
// array of tables.
func tableHeader(t string) string {
	if t == "http" {
		return "[[http]]"
	}
	return "[" + t + "]"
}

// maxCAFileSize caps what Load reads of one ca_files entry.
const maxCAFileSize = 16 << 20

// Load reads the policy file at path and parses it (see Parse). Error
// messages name the file as path was given; Policy.Source is the absolute
// path. Relative ca_files are resolved against the file's directory, and
// Load reads each of them to check that it is a regular file of PEM
// certificates that all parse (other PEM blocks are ignored), so that a bad
// CA file is a policy error at its line rather than a failure later.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the policy file: %w; check the path", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	p, caLines, err := parse(path, filepath.Dir(abs), data)
	if err != nil {
		return nil, err
	}
	p.Source = abs
	var errs []error
	for i, f := range p.CAFiles {
		st, err := os.Stat(f)
		msg := ""
		switch {
		case errors.Is(err, os.ErrNotExist):
			msg = fmt.Sprintf("%s does not exist; fix the path (relative paths are relative to the policy file's directory)", f)
		case err != nil:
			msg = fmt.Sprintf("cannot use %s: %v", f, err)
		case !st.Mode().IsRegular():
			msg = fmt.Sprintf("%s is not a regular file; name a PEM file of CA certificates", f)
		default:
			msg = checkCAFile(f)
		}
		if msg != "" {
			errs = append(errs, &Error{File: path, Line: caLines[i], Msg: "ca_files entry: " + msg})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// checkCAFile reads a ca_files entry and returns what is wrong with it, or
// "".
func checkCAFile(f string) string {
	fh, err := os.Open(f)
	if err != nil {
		return fmt.Sprintf("cannot read %s: %v", f, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxCAFileSize+1))
	switch {
	case err != nil:
		return fmt.Sprintf("cannot read %s: %v", f, err)
	case len(data) > maxCAFileSize:
		return fmt.Sprintf("%s is larger than %d MiB, too large for a PEM file of CA certificates; name the right file", f, maxCAFileSize>>20)
	}
	certs := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		certs++
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Sprintf("certificate %d of %s does not parse (%v); replace it with a valid PEM certificate", certs, f, err)
		}
	}
	if certs == 0 {
		return fmt.Sprintf("%s holds no PEM certificate (no \"-----BEGIN CERTIFICATE-----\" block); name a PEM file of CA certificates", f)
	}
	return ""
}

// Parse parses a policy file's bytes. name is used in error messages and as
// Policy.Source; relative ca_files are made relative to filepath.Dir(name).
//
// The rules for entries:
//
//   - network.default may be omitted; if present it must be "deny": capsem
//     is default-deny and ships no other default.
//   - An allow entry is "name" (port 443 only) or "name:port" (that port
//     only, 1..65535). A deny entry is "name" (every port, and DNS) or
//     "name:port" (that port only). Deny wins over allow.
//   - name is an exact DNS name or "*." followed by one. "*.x" matches every
//     name below x at any depth (a.x, b.a.x), never x itself. Labels are
//     letters, digits, "-" and "_", not starting or ending with "-", at most
//     63 characters; a name has at most 253. Matching ignores case and one
//     trailing dot, in the file and in queries.
//   - IP addresses (and names whose last label is a number, which resolvers
//     read as IP addresses, like "127.1") are rejected: the guest reaches
//     hosts only through capsem's DNS, direct-IP traffic is always refused,
//     and [upstream] resolve is the way to send a name to a fixed address.
//   - Anything else is an error: partial wildcards ("foo*.com", "a.*.b",
//     "**.x"), a bare "*" or "*.", URLs, paths, whitespace, empty entries,
//     bad ports, entries repeated in one list (after normalization, so
//     "x.com" and "X.com:443" are the same allow entry), and a deny entry
//     that cancels an allow entry of the same pattern (deny "x.com" with
//     allow "x.com:8080").
//   - upstream.resolve maps exact names (no wildcards) to "IP", "IP:port",
//     "[IPv6]:port", "host" or "host:port". Two keys naming the same host
//     (differing in case or a trailing dot) are an error.
//   - upstream.ca_files are paths; "" and "~/…" are errors, as are repeats.
//   - Each [[http]] table is a request rule; they are tried in file order
//     (see DecideHTTP). host is required: an exact name or "*.name", as in
//     the network entries, without a port. action is required: "allow" or
//     "deny". methods, optional, are HTTP tokens ("GET", matched ignoring
//     case). paths, optional, are patterns starting with "/" in which "*"
//     matches any run of characters, "/" included; they are in clean form
//     (no "//", "." or ".." segment) and hold only characters a path carries
//     unencoded (letters, digits, "-._~!$&'()+,;=:@/"), because requests are
//     matched after decoding: no "%", "?" (the query is never matched) or
//     "#". Empty or absent methods or paths match any. Repeats within one
//     rule are errors.
//   - tls.passthrough entries are names or "*.name" patterns, as in the
//     network entries, without a port. Repeats are errors, and so is an
//     entry covering a name that an [[http]] rule's host also covers: those
//     requests would not be decrypted, so the rule could not apply.
//   - mitm.preview_bytes is an integer from 0 (no previews) to 1048576.
//   - dns.max_wildcard_names is an integer from 0 (the default, 4096) to
//     262144: distinct names that only a wildcard entry allows, per session.
//   - Unknown keys, keys not in lower case, and values of the wrong type are
//     errors.
//
// Every error carries "name:line" and says what to do. Parse reports up to
// 50 problems at once, sorted by line.
func Parse(name string, data []byte) (*Policy, error) {
	p, _, err := parse(name, filepath.Dir(name), data)
	return p, err
}

// collector gathers the problems of one file.
type collector struct {
	file string
	errs []*Error
}

func (c *collector) add(line int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	// Keep "one problem, one line": nothing the user wrote may break that.
	msg = strings.ReplaceAll(msg, "\r", " ")
	msg = strings.ReplaceAll(msg, "\n", " ")
	if line < 1 {
		line = 1
	}
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Msg: msg})
}

func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	sort.SliceStable(c.errs, func(i, j int) bool { return c.errs[i].Line < c.errs[j].Line })
	errs := c.errs
	if len(errs) > maxErrors {
		errs = errs[:maxErrors]
		errs[maxErrors-1].Msg += fmt.Sprintf(" (and %d more problems after this one)", len(c.errs)-maxErrors)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}

func parse(name, dir string, data []byte) (pol *Policy, caLines []int, err error) {
	c := &collector{file: name}
	defer func() {
		// go-toml is fuzzed upstream and so is this package; this is the
		// last line of defence of "bad input is an error, never a panic".
		if r := recover(); r != nil {
			pol, caLines = nil, nil
			err = &Error{File: name, Line: 1, Msg: fmt.Sprintf("internal error while reading this file (%v); please report it to the capsem developers with the file", r)}
		}
	}()

	sum := sha256.Sum256(data)
	// A UTF-8 byte order mark is harmless; drop it (lines do not move).
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))

	// The walker pairs values and keys with their lines; the decoder's
	// errors are then reported with the keys' full paths.
	w := &walker{c: c, lines: newLineIndex(data)}
	w.walk(data)

	var cfg fileSchema
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if derr := dec.Decode(&cfg); derr != nil {
		var missing *toml.StrictMissingError
		var de *toml.DecodeError
		switch {
		case errors.As(derr, &missing):
			// Everything else decoded; report the unknown keys together
			// with the other problems of the file.
			for i := range missing.Errors[:min(len(missing.Errors), maxErrors)] {
				c.unknownKey(&missing.Errors[i], w)
			}
		case errors.As(derr, &de):
			c.decodeError(de, w)
			return nil, nil, c.err()
		default:
			c.add(1, "cannot read this file as TOML: %v", derr)
			return nil, nil, c.err()
		}
	}

	p := &Policy{
		exact:   map[string]*node{},
		wild:    map[string]*node{},
		resolve: map[string]Target{},
		Source:  name,
		SHA256:  hex.EncodeToString(sum[:]),
	}
	if cfg.Upstream != nil && cfg.Upstream.AllowPrivate != nil {
		p.AllowPrivate = *cfg.Upstream.AllowPrivate
	}
	if m := cfg.MITM; m != nil && m.PreviewBytes != nil {
		if v := *m.PreviewBytes; v < 0 || v > MaxPreviewBytes {
			c.add(w.keyLine([]string{"mitm", "preview_bytes"}), "mitm.preview_bytes = %d: write a number of bytes from 0 (no previews) to %d (1 MiB); the default is %d", v, MaxPreviewBytes, DefaultPreviewBytes)
		} else {
			p.previewSet, p.previewBytes = true, int(v)
		}
	}
	if d := cfg.DNS; d != nil && d.MaxWildcardNames != nil {
		if v := *d.MaxWildcardNames; v < 0 || v > MaxMaxWildcardNames {
			c.add(w.keyLine([]string{"dns", "max_wildcard_names"}), "dns.max_wildcard_names = %d: write a number of names from 1 to %d, or 0 for the default (%d)", v, MaxMaxWildcardNames, DefaultMaxWildcardNames)
		} else {
			p.maxWildcardNames = int(v)
		}
	}

	b := builder{c: c, p: p, pats: map[string]*patState{}}
	// All allow entries first, so that a deny entry can be checked against
	// them wherever it is in the file. Wrong types were reported by the
	// decoder already, so non-strings are skipped.
	for _, l := range w.leaves {
		if l.kind == unstable.String && l.is("network", "allow") && l.index >= 0 {
			b.allow(l)
		}
	}
	for _, l := range w.leaves {
		if l.kind != unstable.String {
			continue
		}
		switch {
		case l.is("network", "default") && l.index < 0:
			if l.value != "deny" {
				c.add(l.line, "network.default = %q: capsem is default-deny and \"deny\" is the only accepted default; remove the key or set it to \"deny\", and list what the guest may reach in network.allow", l.value)
			}
		case l.is("network", "deny") && l.index >= 0:
			b.deny(l)
		case l.is("upstream", "ca_files") && l.index >= 0:
			if f := b.caFile(l, dir); f != "" {
				p.CAFiles = append(p.CAFiles, f)
				caLines = append(caLines, l.line)
			}
		case len(l.path) == 3 && l.path[0] == "upstream" && l.path[1] == "resolve" && l.index < 0:
			b.resolve(l)
		case l.is("tls", "passthrough") && l.index >= 0:
			b.passthrough(l)
		}
	}
	b.httpRules(w)
	b.passthroughConflicts()
	if len(c.errs) == 0 {
		w.crossCheck(&cfg)
	}
	if err := c.err(); err != nil {
		return nil, nil, err
	}
	return p, caLines, nil
}

// patState tracks the entries seen for one pattern, to find repeats.
type patState struct {
	allow     map[uint16]leaf // by effective port
	denyAll   *leaf
	denyPorts map[uint16]leaf
}

type builder struct {
	c       *collector
	p       *Policy
	pats    map[string]*patState
	resKeys map[string]leaf
	cas     map[string]leaf

	pass      map[string]leaf // passthrough entries by pattern
	passList  []hostEntry     // in file order
	httpHosts []hostEntry     // the host of each [[http]] rule
}

// hostEntry is a host pattern of the file and its line.
type hostEntry struct {
	e    entry
	text string
	line int
}

func (b *builder) state(pattern string) *patState {
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

func (b *builder) caFile(l leaf, dir string) string {
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
		f = filepath.Join(dir, f)
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

// httpRuleLeaves are the values of one [[http]] table.
type httpRuleLeaves struct {
	host, action   *leaf
	methods, paths []leaf
}

// httpRules checks and builds the [[http]] rules, in file order.
func (b *builder) httpRules(w *walker) {
	if len(w.httpElems) == 0 {
		return
	}
	els := make([]httpRuleLeaves, len(w.httpElems))
	for i := range w.leaves {
		l := &w.leaves[i]
		if l.kind != unstable.String || l.elem < 0 || l.elem >= len(els) || len(l.path) != 2 || l.path[0] != "http" {
			continue
		}
		e := &els[l.elem]
		switch {
		case l.path[1] == "host" && l.index < 0:
			e.host = l
		case l.path[1] == "action" && l.index < 0:
			e.action = l
		case l.path[1] == "methods" && l.index >= 0:
			e.methods = append(e.methods, *l)
		case l.path[1] == "paths" && l.index >= 0:
			e.paths = append(e.paths, *l)
		}
	}
	b.p.httpExact = map[string][]int{}
	b.p.httpWild = map[string][]int{}
	for i := range els {
		// A rule with a misspelt or mis-cased key has already been
		// reported: do not add "has no host" to it.
		end := w.elemEnd(i)
		reported := slices.ContainsFunc(b.c.errs, func(e *Error) bool { return e.Line >= w.httpElems[i] && e.Line < end })
		b.httpRule(i+1, w.httpElems[i], &els[i], reported)
	}
}

func (b *builder) httpRule(n, line int, el *httpRuleLeaves, reported bool) {
	ok := !reported
	var host entry
	switch {
	case el.host == nil && reported:
	case el.host == nil:
		b.c.add(line, "[[http]] rule %d has no host; add host = \"api.example.com\" (the name it applies to, or \"*.example.com\")", n)
		ok = false
	default:
		var problem string
		host, problem = parseHostOnly(el.host.value, "[[http]] rules apply on every port the name is allowed on")
		if problem != "" {
			b.c.add(el.host.line, "http host %q: %s", el.host.value, problem)
			ok = false
		}
	}
	r := httpRule{}
	switch {
	case el.action == nil && reported:
	case el.action == nil:
		b.c.add(line, "[[http]] rule %d has no action; add action = \"allow\" or action = \"deny\"", n)
		ok = false
	case el.action.value == "allow":
		r.allow = true
	case el.action.value == "deny":
	default:
		b.c.add(el.action.line, "http action %q: write \"allow\" or \"deny\" (in lower case)", el.action.value)
		ok = false
	}
	seen := map[string]leaf{}
	for _, m := range el.methods {
		up := strings.ToUpper(m.value)
		switch {
		case m.value == "":
			b.c.add(m.line, "http method \"\": the method is empty; write a method like \"GET\", or remove the entry")
			ok = false
		case !isToken(m.value):
			b.c.add(m.line, "http method %q: a method is an HTTP token (letters, digits and !#$%%&'*+-.^_`|~, no spaces or commas), like \"GET\"; write one method per string", m.value)
			ok = false
		case seen[up].line > 0:
			b.c.add(m.line, "http method %q repeats %q on line %d (methods ignore case); remove one of them", m.value, seen[up].value, seen[up].line)
			ok = false
		default:
			seen[up] = m
			r.methods = append(r.methods, up)
		}
	}
	seen = map[string]leaf{}
	for _, pl := range el.paths {
		if problem := checkPathPattern(pl.value); problem != "" {
			b.c.add(pl.line, "http path %q: %s", pl.value, problem)
			ok = false
			continue
		}
		if prev, dup := seen[pl.value]; dup {
			b.c.add(pl.line, "http path %q repeats %q on line %d; remove one of them", pl.value, prev.value, prev.line)
			ok = false
			continue
		}
		seen[pl.value] = pl
		r.paths = append(r.paths, pl.value)
	}
	if !ok {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "http[%d] (line %d) host=%s", n, line, el.host.value)
	if len(el.methods) > 0 {
		sb.WriteString(" methods=")
		for i, m := range el.methods {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(m.value)
		}
	}
	if len(r.paths) > 0 {
		sb.WriteString(" paths=" + strings.Join(r.paths, ","))
	}
	sb.WriteString(" action=" + el.action.value)
	r.text = sb.String()

	idx := len(b.p.http)
	b.p.http = append(b.p.http, r)
	if host.wildcard {
		b.p.httpWild[host.base] = append(b.p.httpWild[host.base], idx)
	} else {
		b.p.httpExact[host.base] = append(b.p.httpExact[host.base], idx)
	}
	b.httpHosts = append(b.httpHosts, hostEntry{e: host, text: el.host.value, line: el.host.line})
}

// parseHostOnly parses a host pattern of [[http]] or [tls]: an entry
// without a port. portWhy says why a port is refused.
func parseHostOnly(s, portWhy string) (entry, string) {
	if i := strings.IndexByte(s, '/'); i >= 0 && !strings.Contains(s, "://") {
		return entry{}, "write only the host name here, like \"example.com\"; a path goes in paths = [\"/…\"] of an [[http]] rule"
	}
	e, problem := parseEntry(s)
	if problem == "" && e.port != 0 {
		problem = "write the name without a port: " + portWhy
	}
	return e, problem
}

// maxPathPattern caps the length of a paths entry.
const maxPathPattern = 2048

// checkPathPattern returns what is wrong with a paths entry, or "".
func checkPathPattern(s string) string {
	switch {
	case s == "":
		return "the pattern is empty; write a path like \"/repos/*\", or remove the entry"
	case strings.Contains(s, "://"):
		return "this looks like a URL; write only the path, like \"/repos/*\" (the name goes in host)"
	case s[0] != '/':
		return "a path pattern starts with \"/\", like \"/repos/*\""
	case len(s) > maxPathPattern:
		return fmt.Sprintf("the pattern is %d characters long; write at most %d (\"*\" matches any run of characters)", len(s), maxPathPattern)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isUnreserved(c) || strings.IndexByte("!$&'()*+,;=:@/", c) >= 0:
		case c == '?':
			return "paths are matched without the query string; remove \"?\" and what follows"
		case c == '#':
			return "a fragment (\"#…\") is never sent to the server; remove it"
		case c == '%':
			return "write characters, not percent-escapes: request paths are matched after decoding the escapes of letters, digits and \"-._~\"; use \"*\" in place of other characters"
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			return "the pattern contains whitespace, which a request path never does; use \"*\" in its place, or write one pattern per string"
		default:
			return fmt.Sprintf("the character %q cannot appear unencoded in a request path; use \"*\" in its place", string(rune(c)))
		}
	}
	if c := cleanPath(s); c != s {
		return fmt.Sprintf("the pattern is not in clean form (it has a \"//\", \".\" or \"..\" segment) and would never match, since request paths are cleaned before matching; write %q", c)
	}
	return ""
}

func (b *builder) passthrough(l leaf) {
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
func (b *builder) passthroughConflicts() {
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

// unknownKey reports a key the schema does not have.
func (c *collector) unknownKey(de *toml.DecodeError, w *walker) {
	line, _ := de.Position()
	key := w.fullKey(de.Key(), line)
	parent := ""
	for _, part := range key {
		keys, ok := schemaKeys[parent]
		if !ok {
			break
		}
		match := ""
		for _, k := range keys {
			if strings.EqualFold(k, part) {
				match = k
				break
			}
		}
		if match == "" {
			c.unknownPart(line, parent, part)
			return
		}
		parent = match
	}
	c.add(line, "unknown key %q; remove it", formatKey(key))
}

// unknownPart reports the key part that is not in table parent.
func (c *collector) unknownPart(line int, parent, part string) {
	// A key of another table, put in the wrong place?
	for _, table := range schemaKeys[""] {
		if table == parent {
			continue
		}
		for _, k := range schemaKeys[table] {
			if k == part {
				where := "at the top level"
				if parent != "" {
					where = "in " + tableHeader(parent)
				}
				c.add(line, "key %q belongs in the %s table, not %s; move it under a \"%s\" line", part, tableHeader(table), where, tableHeader(table))
				return
			}
		}
	}
	keys := schemaKeys[parent]
	hint := ""
	if s := suggest(part, keys); s != "" {
		hint = fmt.Sprintf(" did you mean %q?", s)
	}
	if parent == "" {
		c.add(line, "unknown table or key %q:%s the policy file has only the tables [network], [upstream], [[http]], [tls], [mitm] and [dns]; remove or rename it", part, hint)
		return
	}
	c.add(line, "unknown key %q in %s:%s the keys of %s are %s; remove or rename it", part, tableHeader(parent), hint, tableHeader(parent), strings.Join(keys, ", "))
}

// expectedType says what the value at key must be, or "".
func expectedType(key []string) string {
	k := strings.ToLower(strings.Join(key, "."))
	switch {
	case k == "network":
		return "[network] must be a table: a \"[network]\" line followed by its keys"
	case k == "upstream":
		return "[upstream] must be a table: an \"[upstream]\" line followed by its keys"
	case k == "network.default":
		return "network.default must be the string \"deny\", like default = \"deny\""
	case k == "network.allow":
		return "network.allow must be an array of strings, like allow = [\"example.com\", \"pypi.org:443\"]"
	case k == "network.deny":
		return "network.deny must be an array of strings, like deny = [\"uploads.example.com\"]"
	case k == "upstream.resolve" || strings.HasPrefix(k, "upstream.resolve."):
		return "upstream.resolve must map quoted host names to strings, like resolve = { \"api.example.com\" = \"127.0.0.1:8443\" } (quote names: a dotted key makes nested tables)"
	case k == "upstream.ca_files":
		return "upstream.ca_files must be an array of path strings, like ca_files = [\"roots.pem\"]"
	case k == "upstream.allow_private":
		return "upstream.allow_private must be true or false, without quotes"
	case k == "http":
		return "[[http]] rules must be tables, each started by a \"[[http]]\" line, with host and action strings and methods and paths arrays of strings"
	case k == "http.host":
		return "http.host must be a string, like host = \"api.example.com\""
	case k == "http.methods":
		return "http.methods must be an array of strings, like methods = [\"GET\", \"HEAD\"]"
	case k == "http.paths":
		return "http.paths must be an array of strings, like paths = [\"/repos/*\"]"
	case k == "http.action":
		return "http.action must be the string \"allow\" or \"deny\", like action = \"deny\""
	case k == "tls":
		return "[tls] must be a table: a \"[tls]\" line followed by its keys"
	case k == "tls.passthrough":
		return "tls.passthrough must be an array of strings, like passthrough = [\"pinned.example.com\"]"
	case k == "mitm":
		return "[mitm] must be a table: a \"[mitm]\" line followed by its keys"
	case k == "mitm.preview_bytes":
		return "mitm.preview_bytes must be a whole number of bytes, without quotes, like preview_bytes = 4096"
	case k == "dns":
		return "[dns] must be a table: a \"[dns]\" line followed by its keys"
	case k == "dns.max_wildcard_names":
		return "dns.max_wildcard_names must be a whole number of names, without quotes, like max_wildcard_names = 4096"
	}
	return ""
}

// decodeError reports a syntax, type or duplicate-key error from go-toml.
func (c *collector) decodeError(de *toml.DecodeError, w *walker) {
	line, col := de.Position()
	if line == 1 && col == 1 && len(de.Key()) > 0 {
		// go-toml had no position for the value (nested arrays have
		// none): point at its key instead.
		if kl := w.keyLine(de.Key()); kl > 0 {
			line = kl
		}
	}
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	if found := mismatchFound(msg); found != "" {
		if want := expectedType(de.Key()); want != "" {
			c.add(line, "%s; found %s", want, found)
			return
		}
		c.add(line, "%s %q cannot hold %s; fix its value", "key", formatKey(de.Key()), found)
		return
	}
	if strings.Contains(msg, "already defined") || strings.Contains(msg, "already exists") {
		c.add(line, "%s: a key or table may appear only once; merge the two into one", msg)
		return
	}
	c.add(line, "invalid TOML at column %d: %s; fix the syntax (see https://toml.io)", col, msg)
}

// mismatchFound returns what go-toml found when msg is a type-mismatch
// error ("an integer", "a table"), or "".
func mismatchFound(msg string) string {
	var what string
	switch {
	case strings.HasPrefix(msg, "cannot decode TOML "):
		what = strings.TrimPrefix(msg, "cannot decode TOML ")
		if i := strings.Index(what, " into "); i >= 0 {
			what = what[:i]
		}
	case strings.HasPrefix(msg, "cannot store an array table"):
		what = "array table"
	case strings.HasPrefix(msg, "cannot store a table"):
		what = "table"
	default:
		return ""
	}
	switch {
	case what == "":
		return "a value of another type"
	case strings.ContainsRune("aeiou", rune(what[0])):
		return "an " + what
	}
	return "a " + what
}

// formatKey writes a TOML key path, quoting parts that need it.
func formatKey(key []string) string {
	parts := make([]string, len(key))
	for i, k := range key {
		parts[i] = k
		if k == "" || strings.IndexFunc(k, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) >= 0 {
			parts[i] = fmt.Sprintf("%q", k)
		}
	}
	return strings.Join(parts, ".")
}

// suggest returns the key of keys closest to k, if it is a likely typo.
func suggest(k string, keys []string) string {
	best, bestD := "", 3
	for _, cand := range keys {
		if d := editDistance(strings.ToLower(k), cand); d < bestD {
			best, bestD = cand, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// leaf is one scalar value of the file, with where it is.
type leaf struct {
	path    []string
	index   int // position in its array, -1 when not in an array
	elem    int // the [[http]] table it is in (from 0), -1 when none
	kind    unstable.Kind
	value   string // the decoded string, for strings
	line    int    // line of the value
	keyLine int    // line of the key holding the value
}

func (l *leaf) is(table, key string) bool {
	return len(l.path) == 2 && l.path[0] == table && l.path[1] == key
}

// walker reads the syntax tree of a document that the decoder has accepted,
// to pair each value with its line. Because it works on the tree, a string
// that also appears in a comment or under another key cannot be mistaken
// for the value.
type walker struct {
	c      *collector
	lines  lineIndex
	leaves []leaf
	keys   []keyRef // every table header and key, in file order

	httpElems []int // the line of each [[http]] table, in file order
	headers   []int // the line of each table header, in file order
	cur       int   // the [[http]] table being read, -1 when none
}

// elemEnd returns the line after the last one that [[http]] table i can
// span: the next table header or [[http]] element, whichever comes first.
func (w *walker) elemEnd(i int) int {
	start := w.httpElems[i]
	end := math.MaxInt
	if i+1 < len(w.httpElems) {
		end = max(w.httpElems[i+1], start+1)
	}
	for _, h := range w.headers {
		if h > start {
			return min(end, h)
		}
	}
	return end
}

// httpNotArray is the problem of [[http]] rules written as one table.
const httpNotArray = "[[http]] rules are an array of tables: start each rule with a \"[[http]]\" line (two brackets), then its keys"

type keyRef struct {
	path []string
	line int
}

// fullKey returns the full path of the key that go-toml reports as key on
// line: inside inline tables go-toml gives only the innermost part.
func (w *walker) fullKey(key []string, line int) []string {
	var best []string
	for _, k := range w.keys {
		if k.line == line && len(k.path) >= len(key) && len(k.path) > len(best) &&
			slices.Equal(k.path[len(k.path)-len(key):], key) {
			best = k.path
		}
	}
	if best == nil {
		return key
	}
	return best
}

// keyLine returns the line of the first key with this path, or 0.
func (w *walker) keyLine(key []string) int {
	for _, k := range w.keys {
		if len(k.path) == len(key) {
			same := true
			for i := range key {
				if !strings.EqualFold(k.path[i], key[i]) {
					same = false
					break
				}
			}
			if same {
				return k.line
			}
		}
	}
	return 0
}

func (w *walker) walk(data []byte) {
	var p unstable.Parser
	p.Reset(data)
	var table []string
	w.cur = -1
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = table[:0:0]
			line := 0
			for it := e.Key(); it.Next(); {
				k := it.Node()
				if line == 0 {
					line = w.lines.line(k.Raw)
				}
				table = append(table, string(k.Data))
			}
			w.keys = append(w.keys, keyRef{table, line})
			w.headers = append(w.headers, line)
			w.checkCase(table, 0, line)
			w.cur = -1
			if len(table) == 1 && table[0] == "http" {
				if e.Kind == unstable.ArrayTable {
					w.httpElems = append(w.httpElems, line)
					w.cur = len(w.httpElems) - 1
				} else {
					w.c.add(line, "%s", httpNotArray)
				}
			}
		case unstable.KeyValue:
			w.keyValue(table, e)
		}
	}
}

func (w *walker) keyValue(prefix []string, kv *unstable.Node) {
	path := make([]string, len(prefix), len(prefix)+2)
	copy(path, prefix)
	keyLine := 0
	for it := kv.Key(); it.Next(); {
		k := it.Node()
		if keyLine == 0 {
			keyLine = w.lines.line(k.Raw)
		}
		path = append(path, string(k.Data))
	}
	w.keys = append(w.keys, keyRef{path, keyLine})
	w.checkCase(path, len(prefix), keyLine)
	if len(prefix) == 0 && w.cur < 0 && len(path) > 1 && path[0] == "http" {
		// http.host = "…": one table, not an array. (http = { … } is
		// reported by the decoder.)
		w.c.add(keyLine, "%s", httpNotArray)
	}
	w.value(path, -1, kv.Value(), keyLine)
}

func (w *walker) value(path []string, index int, v *unstable.Node, keyLine int) {
	if !v.Valid() {
		return
	}
	switch v.Kind {
	case unstable.Array:
		if index >= 0 {
			return // nested arrays: never valid here, reported by the decoder
		}
		i := 0
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind != unstable.Comment {
				w.value(path, i, c, keyLine)
				i++
			}
		}
	case unstable.InlineTable:
		if index >= 0 {
			if len(path) != 1 || path[0] != "http" || w.cur >= 0 {
				return // never valid, reported by the decoder
			}
			// http = [ { … }, { … } ]: the inline form of [[http]].
			line := keyLine
			if v.Raw.Length > 0 {
				line = w.lines.line(v.Raw)
			}
			w.httpElems = append(w.httpElems, line)
			w.cur = len(w.httpElems) - 1
			for it := v.Children(); it.Next(); {
				if c := it.Node(); c.Kind == unstable.KeyValue {
					w.keyValue(path, c)
				}
			}
			w.cur = -1
			return
		}
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				w.keyValue(path, c)
			}
		}
	default:
		l := leaf{path: path, index: index, elem: w.cur, kind: v.Kind, line: keyLine, keyLine: keyLine}
		if v.Raw.Length > 0 {
			l.line = w.lines.line(v.Raw)
		}
		if v.Kind == unstable.String {
			l.value = string(v.Data)
		}
		w.leaves = append(w.leaves, l)
	}
}

// crossCheck makes sure the walker saw every value the decoder decoded: a
// rule the decisions silently lacked (a deny entry above all) would be a
// hole in the sandbox, so any disagreement is an error.
func (w *walker) crossCheck(cfg *fileSchema) {
	var def, allow, deny, resolve, cas, pass int
	httpGot := make([][4]int, len(w.httpElems)) // host, action, methods, paths
	for _, l := range w.leaves {
		if l.kind != unstable.String {
			continue
		}
		if l.elem >= 0 && l.elem < len(httpGot) && len(l.path) == 2 {
			g := &httpGot[l.elem]
			switch {
			case l.path[1] == "host" && l.index < 0:
				g[0]++
			case l.path[1] == "action" && l.index < 0:
				g[1]++
			case l.path[1] == "methods" && l.index >= 0:
				g[2]++
			case l.path[1] == "paths" && l.index >= 0:
				g[3]++
			}
			continue
		}
		switch {
		case l.is("tls", "passthrough") && l.index >= 0:
			pass++
		case l.is("network", "default") && l.index < 0:
			def++
		case l.is("network", "allow") && l.index >= 0:
			allow++
		case l.is("network", "deny") && l.index >= 0:
			deny++
		case l.is("upstream", "ca_files") && l.index >= 0:
			cas++
		case len(l.path) == 3 && l.path[0] == "upstream" && l.path[1] == "resolve" && l.index < 0:
			resolve++
		}
	}
	var wantDef, wantAllow, wantDeny, wantResolve, wantCAs int
	if n := cfg.Network; n != nil {
		if n.Default != nil {
			wantDef = 1
		}
		wantAllow, wantDeny = len(n.Allow), len(n.Deny)
	}
	if u := cfg.Upstream; u != nil {
		wantResolve, wantCAs = len(u.Resolve), len(u.CAFiles)
	}
	var wantPass int
	if t := cfg.TLS; t != nil {
		wantPass = len(t.Passthrough)
	}
	httpWant := make([][4]int, len(cfg.HTTP))
	for i, h := range cfg.HTTP {
		if h.Host != nil {
			httpWant[i][0] = 1
		}
		if h.Action != nil {
			httpWant[i][1] = 1
		}
		httpWant[i][2], httpWant[i][3] = len(h.Methods), len(h.Paths)
	}
	if def != wantDef || allow != wantAllow || deny != wantDeny || resolve != wantResolve || cas != wantCAs ||
		pass != wantPass || !slices.Equal(httpGot, httpWant) {
		w.c.add(1, "internal error: the policy was read two ways that disagree (default %d/%d, allow %d/%d, deny %d/%d, resolve %d/%d, ca_files %d/%d, passthrough %d/%d, http %v/%v); please report this file to the capsem developers",
			def, wantDef, allow, wantAllow, deny, wantDeny, resolve, wantResolve, cas, wantCAs, pass, wantPass, httpGot, httpWant)
	}
}

// checkCase reports schema keys written in another case ("Allow"): go-toml
// matches struct fields case-insensitively, capsem does not accept them.
// Only path[from:] is checked; the rest was checked with its table header.
func (w *walker) checkCase(path []string, from, line int) {
	parent := ""
	for depth := 0; depth < len(path) && depth < 2; depth++ {
		keys, ok := schemaKeys[parent]
		if !ok {
			return
		}
		part := path[depth]
		match := ""
		for _, k := range keys {
			if strings.EqualFold(k, part) {
				match = k
				break
			}
		}
		if match == "" {
			return // unknown: reported by the decoder
		}
		if match != part && depth >= from {
			w.c.add(line, "key %q must be written in lower case, as %q", part, match)
		}
		parent = match
	}
}

// lineIndex maps byte offsets to 1-based line numbers.
type lineIndex []int // offsets of the start of each line after the first

func newLineIndex(data []byte) lineIndex {
	var idx lineIndex
	for i, c := range data {
		if c == '\n' {
			idx = append(idx, i+1)
		}
	}
	return idx
}

func (li lineIndex) line(r unstable.Range) int {
	off := int(r.Offset)
	// the number of line starts at or before off, plus one
	return sort.Search(len(li), func(i int) bool { return li[i] > off }) + 1
}
