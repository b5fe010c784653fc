package netstack

import "strings"

// presentName writes a query name, as dnsmessage gives it (labels of the
// guest's raw bytes joined by dots, a label never holding a dot itself), in
// RFC 1035 presentation form so that it is safe to store, log and print: a
// byte outside printable ASCII (0x21–0x7e) becomes \DDD (three decimal
// digits) and a backslash becomes \\. A name that was already printable —
// every valid host name — comes back unchanged, with no allocation. The
// result is lower-cased (ASCII only: everything else is escaped) and loses
// its trailing dot, as the policy matches names.
//
// The guest chooses every byte of a query name: stored raw, an ESC, BEL or
// newline in it rewrote the terminal of whoever read the record.
func presentName(raw string) string {
	raw = strings.TrimSuffix(raw, ".")
	clean := true
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x21 || c > 0x7e || c == '\\' || c >= 'A' && c <= 'Z' {
			clean = false
			break
		}
	}
	if clean {
		return raw
	}
	var b strings.Builder
	b.Grow(len(raw) + 8)
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c < 0x21 || c > 0x7e:
			b.WriteByte('\\')
			b.WriteByte('0' + c/100)
			b.WriteByte('0' + c/10%10)
			b.WriteByte('0' + c%10)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
