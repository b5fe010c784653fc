package policy

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/capsem/capsem/dlp"
)

// Package dlp's expected hosts all parse as policy hosts: one that did
// not would silently be left out of the defaults.
func TestDLPExpectedDefaults(t *testing.T) {
	for _, d := range dlp.Detectors() {
		if got, want := defaultExpected.text[d], dlp.ExpectedHosts(d); !slices.Equal(got, want) {
			t.Errorf("%s: the policy's defaults %q, dlp's %q", d, got, want)
		}
	}
	for _, p := range []*Policy{nil, {}, mustParse(t, "")} {
		if got := p.DLP().Expected; !reflect.DeepEqual(got, defaultExpected.text) {
			t.Errorf("the default DLP expects %q, want dlp's %q", got, defaultExpected.text)
		}
	}
}

func TestDLPExpectedAt(t *testing.T) {
	for _, c := range []struct {
		name, src, host string
		want            []string
		why             string
	}{
		{"default", "", "api.anthropic.com", []string{"anthropic-key"}, "the provider's key at its API"},
		{"default case", "", "API.Anthropic.com.", []string{"anthropic-key"}, "names match without case or trailing dot"},
		{"default other", "", "api.anthropic.com.evil.test", nil, "a name that only starts like it"},
		{"default wildcard", "", "generativelanguage.googleapis.com", []string{"google-api-key"}, "*.googleapis.com"},
		{"wildcard not base", "", "amazonaws.com", nil, "*.name is the names below name"},
		{"aws", "", "s3.us-east-1.amazonaws.com", []string{"aws-access-key"}, "the key id only: the secret key is expected nowhere"},
		{"github", "", "api.github.com", []string{"github-token"}, "the API"},
		{"replaced", "[dlp]\nexpected_hosts = { \"github-token\" = [\"github.corp.test\"] }\n", "github.corp.test", []string{"github-token"}, "the list written"},
		{"replaced drops default", "[dlp]\nexpected_hosts = { \"github-token\" = [\"github.corp.test\"] }\n", "api.github.com", nil, "in place of dlp's, not added to it"},
		{"others kept", "[dlp]\nexpected_hosts = { \"github-token\" = [\"github.corp.test\"] }\n", "api.anthropic.com", []string{"anthropic-key"}, "only the detector named changes"},
		{"emptied", "[dlp]\nexpected_hosts = { \"anthropic-key\" = [] }\n", "api.anthropic.com", nil, "an empty list: nowhere"},
		{"defaults off", "[dlp]\ndefault_expected_hosts = false\n", "api.anthropic.com", nil, "no defaults"},
		{"defaults off, one written", "[dlp]\ndefault_expected_hosts = false\nexpected_hosts = { \"openai-key\" = [\"llm.corp.test\"] }\n", "llm.corp.test", []string{"openai-key"}, "only what is written"},
		{"defaults on written", "[dlp]\ndefault_expected_hosts = true\n", "api.openai.com", []string{"openai-key"}, "true is the default"},
		{"two at one host", "[dlp]\nexpected_hosts = { \"jwt\" = [\"api.anthropic.com\"] }\n", "api.anthropic.com", []string{"anthropic-key", "jwt"}, "in dlp's order"},
		{"table form", "[dlp.expected_hosts]\n\"slack-token\" = [\"chat.corp.test\"]\n", "chat.corp.test", []string{"slack-token"}, "a table is a map too"},
	} {
		p, err := Parse("p.toml", []byte(c.src))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := p.DLP().ExpectedAt(c.host); !slices.Equal(got, c.want) {
			t.Errorf("%s: ExpectedAt(%q) = %q, want %q (%s)", c.name, c.host, got, c.want, c.why)
		}
	}
	p := mustParse(t, "[dlp]\nexpected_hosts = { \"anthropic-key\" = [], \"github-token\" = [\"a.test\", \"*.b.test\"] }\n")
	if got := p.DLP().Expected; got["anthropic-key"] != nil || !slices.Equal(got["github-token"], []string{"a.test", "*.b.test"}) || !slices.Equal(got["openai-key"], []string{"api.openai.com"}) {
		t.Errorf("Expected = %q", got)
	}
}

func TestDLPExpectedErrors(t *testing.T) {
	for _, c := range []struct {
		name, src, want, why string
	}{
		{"unknown detector", "[dlp]\nexpected_hosts = { \"github\" = [\"a.test\"] }\n", `p.toml:2: dlp expected_hosts names "github": capsem has no such detector; the detectors are aws-access-key,`, "names are package dlp's"},
		{"unknown detector, empty", "[dlp]\nexpected_hosts = {\n  \"gh\" = [] }\n", `p.toml:3: dlp expected_hosts names "gh": capsem has no such detector`, "an empty list names a detector too"},
		{"port", "[dlp]\nexpected_hosts = { \"github-token\" = [\"a.test:8443\"] }\n", `p.toml:2: dlp expected_hosts entry "a.test:8443" of github-token: write the name without a port`, "hosts, any port"},
		{"url", "[dlp]\nexpected_hosts = { \"github-token\" = [\"https://a.test/\"] }\n", `p.toml:2: dlp expected_hosts entry "https://a.test/" of github-token:`, "names only"},
		{"not lists", "[dlp]\nexpected_hosts = { \"github-token\" = \"a.test\" }\n", `dlp.expected_hosts must map quoted detector names to arrays of strings`, "a list, even of one"},
		{"not a map", "[dlp]\nexpected_hosts = [\"a.test\"]\n", `dlp.expected_hosts must map quoted detector names to arrays of strings`, "by detector"},
		{"not a bool", "[dlp]\ndefault_expected_hosts = \"no\"\n", `dlp.default_expected_hosts must be true or false`, "a bool"},
		{"misspelt", "[dlp]\nexpected_host = {}\n", `did you mean "expected_hosts"?`, "suggested"},
	} {
		_, err := Parse("p.toml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (%s):\n got %v\nwant %s", c.name, c.why, err, c.want)
		}
	}
}
