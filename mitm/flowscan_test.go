package mitm

import (
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/policy"
)

// A detector expected at the flow's host does not scan the request head
// there, and still scans the body; elsewhere it scans both.
func TestFlowScanExpectedHosts(t *testing.T) {
	const anthropic = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx"
	const github = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	text := anthropic + " " + github
	found := func(s *dlp.Scanner) []string {
		if s == nil {
			return nil
		}
		var out []string
		for _, m := range s.ScanString(text) {
			out = append(out, m.Detector)
		}
		return out
	}
	pol := func(src string) *policy.Policy {
		p, err := policy.Parse("p.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, src, host string
		head, body      []string
		why             string
	}{
		{"home", "", "api.anthropic.com", []string{"github-token"}, []string{"anthropic-key", "github-token"}, "the key is the request's credential there"},
		{"elsewhere", "", "other.test", []string{"anthropic-key", "github-token"}, []string{"anthropic-key", "github-token"}, "a key sent to another host is a finding"},
		{"emptied", "[dlp]\nexpected_hosts = { \"anthropic-key\" = [] }\n", "api.anthropic.com", []string{"anthropic-key", "github-token"}, []string{"anthropic-key", "github-token"}, "the policy took the home away"},
		{"only detector expected", "[dlp]\ndetectors = [\"anthropic-key\"]\n", "api.anthropic.com", nil, []string{"anthropic-key"}, "nothing left to scan the head for"},
		{"allow_hosts", "[dlp]\nallow_hosts = [\"api.anthropic.com\"]\n", "api.anthropic.com", nil, nil, "not scanned at all"},
		{"off", "[dlp]\naction = \"off\"\n", "other.test", nil, nil, "no scan"},
	} {
		fs := &flowState{sni: c.host}
		sc := fs.scanFor(&Proxy{}, pol(c.src))
		if got := found(sc.head); !slices.Equal(got, c.head) {
			t.Errorf("%s: the head scan finds %q, want %q (%s)", c.name, got, c.head, c.why)
		}
		if got := found(sc.scanner); !slices.Equal(got, c.body) {
			t.Errorf("%s: the body scan finds %q, want %q (%s)", c.name, got, c.body, c.why)
		}
	}
}

// TestExpectedHostsOnlyWhereCredentialsGo: at a credential's own host its
// detector leaves header values and the query alone, never the path — a
// stolen token put in a file's name on api.github.com is still found.
func TestExpectedHostsOnlyWhereCredentialsGo(t *testing.T) {
	const github = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	pol, err := policy.Parse("p.toml", []byte("[dlp]\naction = \"block\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, target string
		header       bool
		want         string
		why          string
	}{
		{"header", "/user", true, "", "the request's credential at its host"},
		{"query", "/user?access_token=" + github, false, "", "a credential in the query"},
		{"path", "/repos/a/b/contents/" + github, false, "github-token@url", "data the host keeps: a file's name"},
	} {
		fs := &flowState{sni: "api.github.com"}
		ex := &exchange{p: &Proxy{}, fs: fs, pol: pol}
		sc := fs.scanFor(ex.p, pol)
		ex.scanner, ex.dlpBlock = sc.scanner, sc.dlpBlock
		r := httptest.NewRequest("GET", "https://api.github.com"+c.target, nil)
		if c.header {
			r.Header.Set("Authorization", "token "+github)
		}
		refused := ex.checkFields(r, "", sc)
		reason, _, rule, _ := ex.refusal()
		if c.want == "" && refused || c.want != "" && (!refused || reason != ReasonDLPMatch || rule != c.want) {
			t.Errorf("%s: refused %v (%s %s), want %q (%s)", c.name, refused, reason, rule, c.want, c.why)
		}
	}
}
