package contentcoding

import (
	"net/http"
	"strings"
)

// Of is a message's Content-Encoding, every field joined (a list, as this
// package reads it): Get would see only the first of several fields, and
// "identity" followed by "gzip" would pass for uncoded.
func Of(h http.Header) string {
	return strings.Join(h.Values("Content-Encoding"), ", ")
}

// IsCoded reports whether a Content-Encoding names a coding other than
// identity.
func IsCoded(ce string) bool {
	for _, c := range strings.Split(ce, ",") {
		if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
			return true
		}
	}
	return false
}
