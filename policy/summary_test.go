package policy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// A summary says what the file wrote, and says it as JSON with lists, not
// nulls, when the file wrote none.
func TestSummarize(t *testing.T) {
	p, err := Parse("p.toml", []byte(`[network]
allow = ["a.test", "*.b.test", "c.test:8443"]
deny = ["x.b.test"]
[[http]]
host = "a.test"
methods = ["GET"]
paths = ["/x/*"]
action = "deny"
[tls]
passthrough = ["c.test"]
[upstream]
resolve = { "a.test" = "127.0.0.1:9443" }
allow_private = true
`))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Summarize()
	for _, c := range []struct {
		ok  bool
		why string
	}{
		{slices.Equal(s.Allow, []string{"a.test", "*.b.test", "c.test:8443"}), "allow entries as written, in file order"},
		{slices.Equal(s.Deny, []string{"x.b.test"}), "deny entries as written"},
		{len(s.HTTP) == 1 && strings.Contains(s.HTTP[0], "action=deny") && strings.Contains(s.HTTP[0], "host=a.test"), "http rules as a decision names them"},
		{slices.Equal(s.Passthrough, []string{"c.test"}), "tls passthrough"},
		{s.Resolve["a.test"] == "127.0.0.1:9443" && s.AllowPrivate, "upstream resolve and allow_private"},
		{s.SHA256 == p.SHA256 && s.Source == "p.toml", "the file and its hash"},
	} {
		if !c.ok {
			t.Errorf("%s: %+v", c.why, s)
		}
	}
	b, _ := json.Marshal(DenyAll().Summarize())
	if strings.Contains(string(b), "null") {
		t.Errorf("an empty policy's summary has nulls: %s", b)
	}
}
