package listflag

import (
	"slices"
	"strings"
)

// Split is list's items in order, each trimmed of spaces, empty ones
// dropped; nil for an empty list.
func Split(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Has reports whether list names what (compared after trimming spaces).
func Has(list, what string) bool {
	return slices.Contains(Split(list), what)
}
