package dlp

import (
	"regexp"
	"slices"
	"testing"
)

func TestExpectedHosts(t *testing.T) {
	for _, c := range []struct {
		detector string
		want     []string
		why      string
	}{
		{"anthropic-key", []string{"api.anthropic.com"}, "the claude CLI sends its key in X-Api-Key on every request"},
		{"openai-key", []string{"api.openai.com"}, "Authorization: Bearer sk-…"},
		{"google-api-key", []string{"*.googleapis.com"}, "?key=AIza… to every Google API"},
		{"github-token", []string{"github.com", "api.github.com", "uploads.github.com", "raw.githubusercontent.com"}, "the API, git, uploads, private raw files"},
		{"slack-token", []string{"slack.com", "*.slack.com"}, "the Web API"},
		{"stripe-key", []string{"api.stripe.com", "files.stripe.com"}, "the API and its uploads"},
		{"aws-access-key", []string{"*.amazonaws.com"}, "SigV4 names the key id in every request"},
		{"aws-secret-key", nil, "SigV4 never sends the secret: a request with it leaks it"},
		{"private-key", nil, "never a request's credential"},
		{"jwt", nil, "its issuer could be anyone"},
		{"no-such-detector", nil, "an unknown name has no hosts"},
	} {
		if got := ExpectedHosts(c.detector); !slices.Equal(got, c.want) {
			t.Errorf("ExpectedHosts(%q) = %q, want %q (%s)", c.detector, got, c.want, c.why)
		}
	}
	// Every entry is a lower-case name or "*.name", as a policy writes
	// hosts: the policy parses them as it parses its own.
	name := regexp.MustCompile(`^(\*\.)?[a-z0-9-]+(\.[a-z0-9-]+)+$`)
	for _, d := range Detectors() {
		for _, h := range ExpectedHosts(d) {
			if !name.MatchString(h) {
				t.Errorf("%s: expected host %q is no name or *.name", d, h)
			}
		}
	}
	// The caller's copy is its own.
	ExpectedHosts("anthropic-key")[0] = "evil.test"
	if ExpectedHosts("anthropic-key")[0] != "api.anthropic.com" {
		t.Error("ExpectedHosts returned the table itself")
	}
}
