package policy

import (
	"fmt"
	"net/netip"
	"strings"
)

const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// nameProblem says why a string is not a valid DNS name; 0 means it is one.
type nameProblem int

const (
	nameOK           nameProblem = iota
	nameEmpty                    // "" or "."
	nameTooLong                  // more than 253 characters
	nameLeadingDot               // ".example.com"
	nameEmptyLabel               // "a..b"
	nameLabelTooLong             // a label of more than 63 characters
	nameBadChar                  // a byte other than letters, digits, '-', '_', '.'
	nameHyphenEdge               // a label starting or ending with '-'
)

// checkName validates name as a DNS host name: labels of ASCII letters,
// digits, '-' and '_', none empty, none starting or ending with '-', at most
// 63 characters each and 253 in all. One trailing dot is ignored. It returns
// the canonical form (lower case, no trailing dot) and nameOK, or the problem
// and the index in name of the offending byte (or label start).
//
// It allocates only when name has upper-case letters.
func checkName(name string) (canon string, problem nameProblem, at int) {
	if n := len(name); n > 0 && name[n-1] == '.' {
		name = name[:n-1]
	}
	if len(name) == 0 {
		return "", nameEmpty, 0
	}
	if name[0] == '.' {
		return "", nameLeadingDot, 0
	}
	if len(name) > maxNameLen {
		return "", nameTooLong, 0
	}
	upper := false
	labelStart := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			switch {
			case i == labelStart:
				return "", nameEmptyLabel, i
			case i-labelStart > maxLabelLen:
				return "", nameLabelTooLong, labelStart
			case name[labelStart] == '-':
				return "", nameHyphenEdge, labelStart
			case name[i-1] == '-':
				return "", nameHyphenEdge, i - 1
			}
			labelStart = i + 1
			continue
		}
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c >= 'A' && c <= 'Z':
			upper = true
		default:
			return "", nameBadChar, i
		}
	}
	if upper {
		name = lowerASCII(name)
	}
	return name, nameOK, 0
}

// lowerASCII lower-cases the ASCII letters of s (s is known to be ASCII).
func lowerASCII(s string) string {
	b := make([]byte, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return string(b)
}

// Canonical returns the form of a DNS name that the policy matches on: ASCII
// lower case, without the trailing dot. ok is false when name is not a valid
// host name (see Parse for the rules); such names are never allowed.
//
// Callers that key their own tables by name (fake DNS, flow bookkeeping)
// should key them by Canonical(name) so that they agree with the policy.
func Canonical(name string) (canon string, ok bool) {
	c, problem, _ := checkName(name)
	return c, problem == nameOK
}

// describeNameProblem turns a checkName result into the user-facing text
// that follows `<what> "<entry>": `.
func describeNameProblem(name string, problem nameProblem, at int) string {
	switch problem {
	case nameEmpty:
		return "the host name is empty; write a name like \"example.com\""
	case nameTooLong:
		return fmt.Sprintf("the name is %d characters long; a DNS name has at most %d", len(strings.TrimSuffix(name, ".")), maxNameLen)
	case nameLeadingDot:
		return "a leading \".\" is not a wildcard here; write \"example.com\" for the name itself and \"*.example.com\" for its subdomains"
	case nameEmptyLabel:
		return "the name has an empty label (two dots in a row, or a trailing \"..\"); remove the extra dot"
	case nameLabelTooLong:
		return fmt.Sprintf("the label %q is longer than %d characters, the most DNS allows", labelAt(name, at), maxLabelLen)
	case nameHyphenEdge:
		return fmt.Sprintf("the label %q starts or ends with \"-\", which DNS does not allow", labelAt(name, at))
	case nameBadChar:
		c := name[at]
		switch {
		case c == '*':
			return "a wildcard must be a whole leading label, like \"*.example.com\""
		case c >= 0x80:
			return "the name has non-ASCII characters; write internationalized names in their punycode (\"xn--…\") form"
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return "the name contains whitespace; write one name per string, like \"example.com\""
		default:
			return fmt.Sprintf("the character %q is not allowed in a host name; use only letters, digits, \"-\", \"_\" and dots", string(rune(c)))
		}
	}
	return "not a valid host name"
}

// labelAt returns the label of name that contains index at.
func labelAt(name string, at int) string {
	start := strings.LastIndexByte(name[:at], '.') + 1
	end := strings.IndexByte(name[at:], '.')
	if end < 0 {
		return name[start:]
	}
	return name[start : at+end]
}

// numericTLD reports whether the last label of a canonical name is a number
// (decimal, or hexadecimal with 0x): such a "name" is read as an IPv4 address
// by many resolvers ("127.1", "0x7f.1", "10.0.0.1"), so capsem never treats it
// as a host name.
func numericTLD(canon string) bool {
	last := canon[strings.LastIndexByte(canon, '.')+1:]
	if strings.HasPrefix(last, "0x") && len(last) > 2 {
		last = last[2:]
		for i := 0; i < len(last); i++ {
			c := last[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// parsePort parses a decimal port 1..65535 written without sign or leading
// zeros.
func parsePort(s string) (uint16, bool) {
	if len(s) == 0 || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

func portProblem(p string) string {
	return fmt.Sprintf("the port %q must be a number from 1 to 65535 (without leading zeros)", p)
}

const ipEntryHelp = "IP addresses cannot be allowed or denied: the guest reaches hosts only by name " +
	"through capsem's DNS and direct-IP traffic is always refused; list the host name instead " +
	"(to send a name to a fixed address, add it to [upstream] resolve)"

// entry is one parsed allow or deny entry.
type entry struct {
	text     string // as written
	line     int
	pattern  string // canonical: "example.com" or "*.example.com"
	wildcard bool
	base     string // pattern without "*." (the map key)
	port     uint16 // 0: no port written
}

// parseEntry parses an allow or deny entry. It returns a user-facing
// description of the problem when the entry is invalid.
func parseEntry(s string) (e entry, problem string) {
	e.text = s
	switch {
	case s == "":
		return e, "the entry is empty; remove it"
	case strings.TrimSpace(s) == "":
		return e, "the entry is blank; remove it"
	case strings.ContainsAny(s, " \t\r\n"):
		return e, "the entry contains whitespace; write one name per string, like \"example.com\""
	case strings.Contains(s, "://"):
		return e, "this looks like a URL; write only the host name, like \"example.com\" (with \":8080\" for a port other than 443)"
	case strings.ContainsRune(s, '/'):
		return e, "capsem's network policy matches host names and ports, not paths; write only the host name, like \"example.com\""
	case strings.ContainsRune(s, '@'):
		return e, "write only the host name, like \"example.com\", without user information"
	}
	if isIPLiteral(s) {
		return e, ipEntryHelp
	}
	host := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host = s[:i]
		if isIPLiteral(host) || strings.HasPrefix(host, "[") {
			return e, ipEntryHelp
		}
		if strings.ContainsRune(host, ':') {
			return e, "the entry has more than one ':'; write \"name\" for port 443 or \"name:port\" for another port"
		}
		ps := s[i+1:]
		if ps == "" {
			return e, "the ':' is not followed by a port; write \"name:port\", like \"example.com:8080\", or drop the ':' for port 443"
		}
		p, ok := parsePort(ps)
		if !ok {
			return e, portProblem(ps)
		}
		e.port = p
	}
	if host == "*." {
		return e, "\"*.\" must be followed by a domain, like \"*.example.com\""
	}
	if host == "*" {
		return e, "a bare \"*\" would allow or deny every name; capsem is default-deny: list the names themselves, or \"*.example.com\" for the subdomains of one"
	}
	name := host
	if strings.HasPrefix(host, "*.") {
		e.wildcard = true
		name = host[2:]
	}
	if strings.ContainsRune(name, '*') {
		return e, "a wildcard must be a whole leading label, like \"*.example.com\""
	}
	canon, np, at := checkName(name)
	if np != nameOK {
		return e, describeNameProblem(name, np, at)
	}
	if numericTLD(canon) {
		if e.wildcard {
			return e, "the name ends in a number, so it reads as an IP address. " + ipEntryHelp
		}
		return e, ipEntryHelp
	}
	e.base = canon
	e.pattern = canon
	if e.wildcard {
		e.pattern = "*." + canon
	}
	return e, ""
}

// isIPLiteral reports whether s is an IP address, with or without brackets
// or a zone.
func isIPLiteral(s string) bool {
	s = strings.TrimPrefix(s, "[")
	s = strings.TrimSuffix(s, "]")
	_, err := netip.ParseAddr(s)
	return err == nil
}

// parseTarget parses an [upstream] resolve value: "IP", "IP:port",
// "[IPv6]:port", "host" or "host:port".
func parseTarget(s string) (Target, string) {
	var t Target
	if s == "" {
		return t, "the target is empty; write an address like \"127.0.0.1:8443\" or a host name like \"backend.internal:443\""
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return t, "the target contains whitespace; write an address like \"127.0.0.1:8443\" or a host name like \"backend.internal:443\""
	}
	if strings.Contains(s, "://") || strings.ContainsRune(s, '/') {
		return t, "this looks like a URL; write only host[:port], like \"127.0.0.1:8443\" or \"backend.internal\""
	}
	host, portStr, hasPort := s, "", false
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return t, "the \"[\" is not closed; write an IPv6 address with a port as \"[::1]:8443\""
		}
		host = s[1:end]
		rest := s[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			portStr, hasPort = rest[1:], true
		default:
			return t, "after \"]\" only \":port\" may follow, like \"[::1]:8443\""
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return t, fmt.Sprintf("%q is not an IPv6 address; brackets are only for IPv6 addresses, like \"[::1]:8443\"", host)
		}
	case strings.Count(s, ":") > 1:
		// A bare IPv6 address, which cannot carry a port.
		if _, err := netip.ParseAddr(s); err != nil {
			return t, "the target has several ':' but is not an IPv6 address; write \"[IPv6]:port\", \"IPv4:port\" or \"host:port\""
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, portStr, hasPort = s[:i], s[i+1:], true
	}
	if hasPort {
		p, ok := parsePort(portStr)
		if !ok {
			if portStr == "" {
				return t, "the ':' is not followed by a port; write \"host:port\", like \"127.0.0.1:8443\", or drop the ':' to keep the guest's port"
			}
			return t, portProblem(portStr)
		}
		t.Port = p
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		switch {
		case addr.Zone() != "":
			return t, "IPv6 zones (\"%eth0\") are not supported; write the address without a zone"
		case addr.IsUnspecified():
			return t, fmt.Sprintf("%s is the unspecified address and cannot be connected to; write the address of the upstream server", addr)
		case addr.IsMulticast():
			return t, fmt.Sprintf("%s is a multicast address; write the unicast address of the upstream server", addr)
		}
		t.Host = addr.String()
		t.Pinned = true
		return t, ""
	}
	if host == "" {
		return t, "the host is missing before the ':'; write \"host:port\", like \"127.0.0.1:8443\""
	}
	canon, np, at := checkName(host)
	if np != nameOK {
		return t, describeNameProblem(host, np, at)
	}
	if numericTLD(canon) {
		return t, fmt.Sprintf("%q is neither a complete IP address nor a host name; write a full address like \"127.0.0.1\" or a name", host)
	}
	t.Host = canon
	return t, ""
}

// anyMatches reports whether host, a name as the guest resolved it, is
// matched by one of entries (names and "*.name" patterns, ports ignored).
func anyMatches(entries []entry, host string) bool {
	canon, ok := Canonical(host)
	if !ok {
		return false
	}
	for _, e := range entries {
		if e.wildcard && strings.HasSuffix(canon, "."+e.base) || !e.wildcard && canon == e.base {
			return true
		}
	}
	return false
}
