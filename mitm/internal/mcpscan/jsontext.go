package mcpscan

import (
	"strconv"
	"unicode/utf8"
)

// appendString appends s as a JSON string of at most max bytes, quotes
// included (max < 0: no cap), cutting it at a whole character, and reports
// whether it was cut. Only what JSON requires is escaped, so that an id
// quoted again reads as the client wrote it in the common case.
func appendString(dst []byte, s []byte, max int) ([]byte, bool) {
	dst = append(dst, '"')
	limit := func(n int) bool { return max >= 0 && n > max }
	start := len(dst) - 1
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		var esc []byte
		switch {
		case r == '"':
			esc = []byte(`\"`)
		case r == '\\':
			esc = []byte(`\\`)
		case r == '\n':
			esc = []byte(`\n`)
		case r == '\r':
			esc = []byte(`\r`)
		case r == '\t':
			esc = []byte(`\t`)
		case r < 0x20:
			esc = []byte(`\u00`)
			esc = append(esc, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&0xF])
		case r == utf8.RuneError && size == 1:
			esc = []byte(`\ufffd`)
		default:
			esc = s[:size]
		}
		// Room for this character and the closing quote.
		if limit(len(dst) - start + len(esc) + 1) {
			return append(dst, '"'), true
		}
		dst = append(dst, esc...)
		s = s[size:]
	}
	return append(dst, '"'), false
}

// quote returns s as a JSON string, uncapped.
func quote(s string) []byte {
	b, _ := appendString(nil, []byte(s), -1)
	return b
}

// atoi reads a JSON number as an int: an integer, or a float with an
// integral value (-32600.0); anything else is 0.
func atoi(num []byte) int {
	if n, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return int(n)
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != float64(int64(f)) {
		return 0
	}
	return int(f)
}
