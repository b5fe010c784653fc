package mitm

import (
	"net/http"
	"reflect"
	"testing"
)

func TestStripH3AltSvc(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []string
		changed bool
		why     string
	}{
		{[]string{`h3=":443"; ma=86400`}, nil, true, "the only offer is HTTP/3: the field goes"},
		{[]string{`h3=":443"; ma=86400, h3-29=":443"; ma=86400, h2=":443"`}, []string{`h2=":443"`}, true, "drafts go with h3; other alternatives stay"},
		{[]string{`h2="alt.example:443"`}, []string{`h2="alt.example:443"`}, false, "no HTTP/3 offered: untouched"},
		{[]string{`clear`}, []string{`clear`}, false, "clear is kept"},
		{[]string{`h3=":443"`, `h2=":8443"`}, []string{`h2=":8443"`}, true, "several fields"},
		{nil, nil, false, "no field"},
	} {
		h := http.Header{}
		for _, v := range tc.in {
			h.Add("Alt-Svc", v)
		}
		changed := stripH3AltSvc(h)
		if got := h.Values("Alt-Svc"); changed != tc.changed || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q -> %q (changed %v), want %q (%v)", tc.why, tc.in, got, changed, tc.want, tc.changed)
		}
	}
}
