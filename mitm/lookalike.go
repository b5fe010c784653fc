package mitm

import (
	"net/http"
	"slices"
	"strings"
)

// messageHeaders are the headers that decide where an HTTP/1.1 message
// ends, what the connection becomes, or where the request goes.
var messageHeaders = map[string]bool{
	"content-length":    true,
	"transfer-encoding": true,
	"connection":        true,
	"upgrade":           true,
	"te":                true,
	"trailer":           true,
	"keep-alive":        true,
	"proxy-connection":  true,
	"host":              true,
	"http2-settings":    true,
	"expect":            true,
}

// stripLookalikes removes the headers whose names are not one of
// messageHeaders but that an upstream may read as one, and returns their
// names. Go's server takes "Transfer_Encoding: chunked" as an ordinary
// header and forwards it next to the Content-Length it framed the body
// with; an upstream that maps '_' and '-' alike (as servers that turn
// headers into CGI-style variables do) reads the body as chunked, and a
// body of "0\r\n\r\nGET /admin/x …" becomes a second request the policy
// never saw (tests/mitm_smuggle_test.go, TestSmuggleFramingHeaderLookalikes).
func stripLookalikes(h http.Header) []string {
	var out []string
	for k := range h {
		if !strings.Contains(k, "_") {
			continue
		}
		if messageHeaders[strings.ReplaceAll(strings.ToLower(k), "_", "-")] {
			delete(h, k)
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
