package mitm

import (
	"net/http"
	"testing"
)

func TestHTTPVersion(t *testing.T) {
	cases := []struct {
		why          string
		major, minor int
		want         string
	}{
		{"an HTTP/1.1 request", 1, 1, "HTTP/1.1"},
		{"an HTTP/1.0 client is recorded as such", 1, 0, "HTTP/1.0"},
		{"Go's server reads HTTP/1.2 as 1.1", 1, 2, "HTTP/1.1"},
		{"an HTTP/2 stream", 2, 0, "HTTP/2"},
		{"an HTTP/3 stream (quic-go's http3 says 3.0)", 3, 0, "HTTP/3"},
		{"a version no server hands over has none", 0, 9, ""},
	}
	for _, c := range cases {
		if got := httpVersion(&http.Request{ProtoMajor: c.major, ProtoMinor: c.minor}); got != c.want {
			t.Errorf("%s: %d.%d recorded as %q, want %q", c.why, c.major, c.minor, got, c.want)
		}
	}
}
