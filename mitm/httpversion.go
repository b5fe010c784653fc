package mitm

import (
	"net/http"

	"github.com/capsem/capsem/store"
)

// httpVersion names the HTTP version the guest spoke on r, as the request's
// event records it (store.Net.HTTPVersion): the guest's side, whatever
// capsem speaks upstream. A 1.x minor above 1 is recorded as HTTP/1.1,
// which is how Go's server treats it; a major the servers never hand over
// is "" (no version), rather than guest text.
func httpVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 1:
		if r.ProtoMinor == 0 {
			return store.HTTP10
		}
		return store.HTTP11
	case 2:
		return store.HTTP2
	case 3:
		return store.HTTP3
	}
	return ""
}
