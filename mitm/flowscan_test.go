package mitm

import (
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
