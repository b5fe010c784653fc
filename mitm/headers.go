package mitm

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"

	"github.com/capsem/capsem/store"
)

// secretHeaders are headers whose values are credentials.
var secretHeaders = map[string]bool{
	"authorization":        true,
	"proxy-authorization":  true,
	"cookie":               true,
	"set-cookie":           true,
	"x-api-key":            true,
	"api-key":              true,
	"x-goog-api-key":       true,
	"x-auth-token":         true,
	"x-amz-security-token": true,
}

// isSecretHeader says whether a header's value must never be stored in
// clear: the well-known credential headers and any header whose name
// mentions a token, secret, password, key or session.
func isSecretHeader(name string) bool {
	n := strings.ToLower(name)
	if secretHeaders[n] {
		return true
	}
	for _, w := range []string{"token", "secret", "passw", "key", "session", "auth", "cookie", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// HashSecret is how a secret header value is stored: enough to tell two
// values apart and to match a known key, not to recover it.
func HashSecret(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// recordHeaders converts h for an event, sorted by name (http.Header
// keeps no order; see wireorder.go for when the wire order is known),
// secret values hashed.
func recordHeaders(h http.Header) []store.Header {
	names := make([]string, 0, len(h))
	n := 0
	for k, vv := range h {
		names = append(names, k)
		n += len(vv)
	}
	slices.Sort(names)
	fields := make([]store.Header, 0, n)
	for _, k := range names {
		for _, v := range h[k] {
			fields = append(fields, store.Header{Name: k, Value: v})
		}
	}
	return recordFields(fields)
}

// recordFields prepares fields, in the order given, for an event: secret
// values are hashed (in place).
func recordFields(fields []store.Header) []store.Header {
	for i, f := range fields {
		if isSecretHeader(f.Name) {
			fields[i].Value = HashSecret(f.Value)
		}
	}
	return fields
}
