package ui

import (
	"net/http/httptest"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		site, origin string
		want         bool
		why          string
	}{
		{"same-origin", "null", true, "chromium's post from the page: no Referer, so Origin null"},
		{"same-origin", "", true, "Sec-Fetch-Site alone"},
		{"cross-site", "http://127.0.0.1:8080", false, "Sec-Fetch-Site decides over a forged-looking Origin"},
		{"same-site", "http://127.0.0.1:8080", false, "another port of this host is another origin"},
		{"none", "", false, "typed into the address bar: no page posted it"},
		{"", "http://127.0.0.1:8080", true, "an older browser naming this server"},
		{"", "http://evil.example", false, "an older browser on another site"},
		{"", "null", false, "an older browser, no origin"},
		{"", "", false, "neither header: not a browser's form"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("POST", "http://127.0.0.1:8080/tok/asks/a/q1", nil)
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if got := sameOrigin(r); got != tc.want {
			t.Errorf("Sec-Fetch-Site %q, Origin %q: %v, want %v (%s)", tc.site, tc.origin, got, tc.want, tc.why)
		}
	}
}
