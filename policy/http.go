package policy

import (
	"path"
	"strings"
)

// Reasons that only DecideHTTP gives.
const (
	// ReasonInvalidRequest: the method is not an HTTP token, or the path is
	// neither "*" nor an origin-form path ("/…" without control characters,
	// spaces or broken percent-escapes). Such a request is refused whatever
	// the rules say.
	ReasonInvalidRequest = "invalid-request"
	// ReasonAmbiguousPath: the ways servers read the path (percent-decoded
	// or not, "//" merged or not, "\" as "/", ";params" dropped) lead to
	// different decisions, so the request is refused. Rule is the rule that
	// denied one of the readings.
	ReasonAmbiguousPath = "ambiguous-path"
)

// Limits of [mitm] preview_bytes.
const (
	DefaultPreviewBytes = 4096    // when the file does not set preview_bytes
	MaxPreviewBytes     = 1 << 20 // the largest value accepted (1 MiB)
)

// httpRule is one [[http]] table.
type httpRule struct {
	text    string   // Decision.Rule
	allow   bool     // action = "allow"
	methods []string // upper case; empty: any method
	paths   []string // glob patterns; empty: any path
}

func (r *httpRule) matches(method, p string) bool {
	if len(r.methods) > 0 {
		found := false
		for _, m := range r.methods {
			if strings.EqualFold(m, method) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(r.paths) == 0 {
		return true
	}
	for _, pat := range r.paths {
		if globMatch(pat, p) {
			return true
		}
	}
	return false
}

// DecideHTTP decides one HTTP request that the MITM has decrypted: method
// and path to host. host is the name the flow was allowed for (the SNI, or
// the name fake DNS answered), without a port; path is the request's path as
// sent, still percent-encoded (r.URL.EscapedPath(), or the HTTP/2 :path),
// WITHOUT the query string: the rules never look at the query (anything from
// the first "?" or "#" is ignored anyway).
//
// The [network] decision comes first: a host that DecideName denies is
// denied here too, with that decision, so an [[http]] allow rule never lets
// through what [network] refuses. A request whose method is not an HTTP token
// or whose path is not origin-form ("/…", or "*" for OPTIONS) is denied with
// ReasonInvalidRequest.
//
// Then the [[http]] rules are tried in file order and the first one whose
// host, methods and paths all match decides: Allowed is its action, Rule
// names it ("http[2] (line 14) host=api.github.com methods=GET,HEAD
// paths=/repos/* action=deny", counting [[http]] tables from 1) and Reason is
// ReasonAllowed or ReasonDeniedByRule. When no rule matches, the [network]
// decision stands: the request is allowed, with the allow entry as Rule.
//
// Methods match case-insensitively. Paths are case-sensitive and are matched
// after normalization, so that "/repos/../admin" or "/repos/%2e%2e/admin"
// cannot sneak past a deny rule or into an allow rule: percent-encoded
// letters, digits and "-._~" are decoded and dot segments are removed with
// path.Clean semantics ("//" merged, a trailing "/" kept). Servers disagree on
// the rest (whether "%2F" is a "/", whether "//" is merged, "\" read as "/",
// "/..;/" tricks), so the path is also read those other ways; if any reading
// gets another decision than the first, the request is denied with
// ReasonAmbiguousPath. Plain paths are read once.
func (p *Policy) DecideHTTP(host, method, reqPath string) Decision {
	d := p.DecideName(host)
	if !d.Allowed {
		return d
	}
	if !isToken(method) {
		return Decision{Reason: ReasonInvalidRequest}
	}
	if i := strings.IndexAny(reqPath, "?#"); i >= 0 {
		reqPath = reqPath[:i]
	}
	if !validRequestPath(reqPath) {
		return Decision{Reason: ReasonInvalidRequest}
	}
	if len(p.http) == 0 {
		return d
	}
	canon, _ := Canonical(host) // valid: DecideName allowed it
	var views [4]string
	n := pathViews(reqPath, &views)
	first := p.httpDecision(canon, method, views[0], d)
	for _, v := range views[1:n] {
		other := p.httpDecision(canon, method, v, d)
		if other.Allowed != first.Allowed {
			rule := first.Rule
			if first.Allowed {
				rule = other.Rule
			}
			return Decision{Rule: rule, Reason: ReasonAmbiguousPath}
		}
	}
	return first
}

// httpDecision applies the first [[http]] rule for canon that matches method
// and the normalized path, or returns fallback.
func (p *Policy) httpDecision(canon, method, normPath string, fallback Decision) Decision {
	best := -1
	p.httpLists(canon, func(list []int) {
		for _, i := range list {
			if best >= 0 && i >= best {
				return
			}
			if p.http[i].matches(method, normPath) {
				best = i
				return
			}
		}
	})
	if best < 0 {
		return fallback
	}
	r := &p.http[best]
	if r.allow {
		return Decision{Allowed: true, Rule: r.text, Reason: ReasonAllowed}
	}
	return Decision{Rule: r.text, Reason: ReasonDeniedByRule}
}

// httpLists calls f with the indexes (ascending) of the [[http]] rules whose
// host pattern matches canon, one list per matching pattern.
func (p *Policy) httpLists(canon string, f func([]int)) {
	if l := p.httpExact[canon]; l != nil {
		f(l)
	}
	if len(p.httpWild) == 0 {
		return
	}
	for i := 0; i < len(canon); i++ {
		if canon[i] == '.' {
			if l := p.httpWild[canon[i+1:]]; l != nil {
				f(l)
			}
		}
	}
}

// Passthrough reports whether TLS to name is spliced through without
// interception ([tls] passthrough), and the entry that says so, as written.
// name is matched like in the decisions (case-insensitive, trailing dot
// ignored); the exact entry wins over wildcards, then the nearest wildcard.
// Passthrough does not allow anything: the flow must be allowed first, and
// the SNI is still checked against the policy.
func (p *Policy) Passthrough(name string) (rule string, ok bool) {
	if !p.usable() || len(p.passExact)+len(p.passWild) == 0 {
		return "", false
	}
	canon, valid := Canonical(name)
	if !valid {
		return "", false
	}
	if r, ok := p.passExact[canon]; ok {
		return r, true
	}
	for i := 0; i < len(canon); i++ {
		if canon[i] == '.' {
			if r, ok := p.passWild[canon[i+1:]]; ok {
				return r, true
			}
		}
	}
	return "", false
}

// PreviewBytes is [mitm] preview_bytes: how many bytes of each HTTP body the
// MITM keeps as a preview in the event store. 0 means no previews; the
// default is DefaultPreviewBytes and the most MaxPreviewBytes.
func (p *Policy) PreviewBytes() int {
	if !p.usable() || !p.previewSet {
		return DefaultPreviewBytes
	}
	return p.previewBytes
}

// UpstreamCAFiles returns [upstream] ca_files, the PEM files of extra roots
// for verifying upstream TLS, as paths: absolute after Load (which also
// checked that each one holds PEM certificates); after Parse, relative paths
// are joined to the directory of the name given to Parse. The slice is a
// copy.
func (p *Policy) UpstreamCAFiles() []string {
	if !p.usable() || len(p.CAFiles) == 0 {
		return nil
	}
	return append([]string(nil), p.CAFiles...)
}

// isToken reports whether s is an HTTP token (RFC 9110 section 5.6.2), the
// syntax of a method.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validRequestPath reports whether p is "*" or a path that starts with "/",
// has no control characters or spaces, and only well-formed percent-escapes.
func validRequestPath(p string) bool {
	if p == "*" {
		return true
	}
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c <= ' ' || c == 0x7f:
			return false
		case c == '%':
			if i+2 >= len(p) || unhex(p[i+1]) < 0 || unhex(p[i+2]) < 0 {
				return false
			}
			i += 2
		}
	}
	return true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// isPlain reports whether every reading of p is p itself: no escapes, no
// "\" or ";", no "//" and no "." or ".." segment.
func isPlain(p string) bool {
	if strings.ContainsAny(p, "%\\;") || strings.Contains(p, "//") {
		return false
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// pathViews writes the distinct readings of a valid request path into views
// and returns how many there are; views[0] is the one DecideHTTP reports.
func pathViews(p string, views *[4]string) int {
	if p == "*" || isPlain(p) {
		views[0] = p
		return 1
	}
	n := 0
	add := func(v string) {
		for _, have := range views[:n] {
			if have == v {
				return
			}
		}
		views[n] = v
		n++
	}
	u := decodeUnreserved(p)
	add(cleanPath(u))
	add(removeDotSegments(u))
	if strings.ContainsAny(p, "%\\;") {
		f := decodeAll(p)
		add(cleanPath(f))
		add(removeDotSegments(f))
	}
	return n
}

// decodeUnreserved decodes the percent-escapes of unreserved characters
// (RFC 3986 section 6.2.2.2), which every server reads as the character,
// and upper-cases the hex digits of the others.
func decodeUnreserved(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		c := byte(unhex(p[i+1])<<4 | unhex(p[i+2]))
		if isUnreserved(c) {
			b.WriteByte(c)
		} else {
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
		i += 2
	}
	return b.String()
}

// decodeAll is the most generous reading of a path: every escape decoded,
// "\" taken for "/", and ";params" dropped from every segment.
func decodeAll(p string) string {
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' {
			c = byte(unhex(p[i+1])<<4 | unhex(p[i+2]))
			i += 2
		}
		if c == '\\' {
			c = '/'
		}
		b = append(b, c)
	}
	out := b[:0]
	inParams := false
	for _, c := range b {
		switch {
		case c == '/':
			inParams = false
		case c == ';':
			inParams = true
		}
		if !inParams {
			out = append(out, c)
		}
	}
	return string(out)
}

// cleanPath is path.Clean, keeping a trailing "/".
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// removeDotSegments is RFC 3986 section 5.2.4 for a path starting with "/":
// like path.Clean, except that "//" is not merged (an empty segment is a
// segment).
func removeDotSegments(p string) string {
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

// globMatch matches s against pattern, where "*" matches any run of bytes,
// "/" included, and every other byte matches itself. It runs in
// O(len(pattern)*len(s)) at worst.
func globMatch(pattern, s string) bool {
	px, sx := 0, 0
	nextPx, nextSx := 0, 0
	for px < len(pattern) || sx < len(s) {
		if px < len(pattern) {
			c := pattern[px]
			if c == '*' {
				nextPx, nextSx = px, sx+1
				px++
				continue
			}
			if sx < len(s) && s[sx] == c {
				px++
				sx++
				continue
			}
		}
		if 0 < nextSx && nextSx <= len(s) {
			px, sx = nextPx, nextSx
			continue
		}
		return false
	}
	return true
}
