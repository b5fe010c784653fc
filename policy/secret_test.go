package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const secretPolicy = `[network]
allow = ["other.test"]

[[secret]]
name = "ANTHROPIC_API_KEY"
from_env = "HOST_ANTHROPIC"
hosts = ["api.anthropic.com"]

[[secret]]
name = "GH"
from_file = "keys/gh.txt"
hosts = ["github.com", "*.github.com"]
placeholder = "fixed-placeholder-for-gh"

[dlp]
action = "block"
detectors = ["github-token", "aws-access-key"]
allow_hosts = ["*.internal.test"]
`

func TestSecretTables(t *testing.T) {
	p, err := Parse("/etc/capsem/p.toml", []byte(secretPolicy))
	if err != nil {
		t.Fatal(err)
	}
	ss := p.Secrets()
	if len(ss) != 2 {
		t.Fatalf("%d secrets", len(ss))
	}
	a, g := ss[0], ss[1]
	if a.Name != "ANTHROPIC_API_KEY" || a.FromEnv != "HOST_ANTHROPIC" || a.FromFile != "" || a.Line != 4 || a.Placeholder != "" {
		t.Errorf("first secret %+v", *a)
	}
	if g.FromFile != "/etc/capsem/keys/gh.txt" || g.Placeholder != "fixed-placeholder-for-gh" {
		t.Errorf("second secret: from_file %q placeholder %q", g.FromFile, g.Placeholder)
	}
	for _, c := range []struct {
		s    *Secret
		host string
		want bool
		why  string
	}{
		{a, "api.anthropic.com", true, "its host"},
		{a, "API.Anthropic.com.", true, "names match without case and trailing dot"},
		{a, "anthropic.com", false, "a parent is another host"},
		{a, "evil-api.anthropic.com", false, "no wildcard was written"},
		{g, "github.com", true, "exact"},
		{g, "api.github.com", true, "under the wildcard"},
		{g, "github.com.evil.test", false, "a suffix that is not a parent"},
	} {
		if got := c.s.Binds(c.host); got != c.want {
			t.Errorf("%s binds %s = %v, want %v (%s)", c.s.Name, c.host, got, c.want, c.why)
		}
	}
	// A secret's hosts are reachable on 443 without a [network] entry.
	for _, c := range []struct {
		name string
		port uint16
		want bool
		why  string
	}{
		{"api.anthropic.com", 443, true, "allowed by the secret"},
		{"api.anthropic.com", 80, false, "443 only"},
		{"x.github.com", 443, true, "a wildcard host allows the names under it"},
		{"other.test", 443, true, "[network] as ever"},
	} {
		if d := p.DecideFlow(c.name, c.port); d.Allowed != c.want {
			t.Errorf("DecideFlow(%s, %d) = %+v, want allowed %v (%s)", c.name, c.port, d, c.want, c.why)
		}
	}
	d := p.DLP()
	if d.Action != DLPBlock || !reflect.DeepEqual(d.Detectors, []string{"github-token", "aws-access-key"}) || !d.Exempt("a.internal.test") || d.Exempt("internal.test") {
		t.Errorf("DLP %+v", d)
	}
	if def := mustParse(t, "").DLP(); def.Action != DLPLog || def.Detectors != nil {
		t.Errorf("the default DLP is %+v, want log with every detector", def)
	}
	sum := p.Summarize()
	if !reflect.DeepEqual(sum.Secrets, []string{"ANTHROPIC_API_KEY@api.anthropic.com", "GH@github.com,*.github.com"}) || sum.DLP != "block (github-token, aws-access-key)" {
		t.Errorf("summary secrets %q dlp %q", sum.Secrets, sum.DLP)
	}
}

func TestSecretErrors(t *testing.T) {
	tests := []struct {
		name, src, want, why string
	}{
		{"no name", "[[secret]]\nfrom_env = \"X\"\nhosts = [\"a.test\"]\n", `p.toml:1: [[secret]] 1 has no name`, "the guest's variable must be named"},
		{"bad name", "[[secret]]\nname = \"A-B\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\n", `p.toml:2: secret name "A-B": write an environment variable name`, "it becomes an environment variable"},
		{"both sources", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nfrom_file = \"f\"\nhosts = [\"a.test\"]\n", `p.toml:4: [[secret]] 1 has both from_env and from_file`, "exactly one source"},
		{"no source", "[[secret]]\nname = \"A\"\nhosts = [\"a.test\"]\n", `p.toml:1: [[secret]] 1 says nowhere where its real value is`, "exactly one source"},
		{"no hosts", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\n", `p.toml:1: [[secret]] 1 has no hosts`, "a secret bound nowhere is a mistake"},
		{"host with port", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"a.test:8443\"]\n", `p.toml:4: secret host "a.test:8443": write the name without a port`, "secrets go over 443"},
		{"short placeholder", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\nplaceholder = \"short\"\n", `p.toml:5: secret placeholder "short": write at least 16 characters`, "a short placeholder turns up by chance"},
		{"tilde user", "[[secret]]\nname = \"A\"\nfrom_file = \"~bob/k\"\nhosts = [\"a.test\"]\n", `p.toml:3: secret from_file "~bob/k": only "~/" (your home) is expanded`, "no other user's home"},
		{"repeated name", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\n[[secret]]\nname = \"A\"\nfrom_env = \"Y\"\nhosts = [\"b.test\"]\n", `p.toml:5: [[secret]] A repeats the one on line 1`, "one variable, one secret"},
		{"passthrough", "[tls]\npassthrough = [\"*.a.test\"]\n[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"api.a.test\"]\n", `p.toml:6: [[secret]] A (line 3): host "api.a.test" is under [tls] passthrough entry "*.a.test" (line 2)`, "passthrough is not decrypted: nothing could be replaced"},
		{"denied", "[network]\ndeny = [\"a.test\"]\n[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\n", `p.toml:6: [[secret]] A (line 3): host "a.test" is denied by deny entry "a.test" on line 2`, "a denied host never gets the value"},
		{"in unknown part", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\nin = [\"header\", \"cookie\"]\n", `p.toml:5: secret in "cookie": write "header", "query", "path" or "body"`, "only the parts capsem substitutes in"},
		{"in twice", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\nin = [\"body\", \"body\"]\n", `p.toml:5: secret in "body" is listed twice`, "a repeated part is a slip"},
		{"in not strings", "[[secret]]\nname = \"A\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\nin = \"body\"\n", `secret.in must be an array of strings`, "a list, even of one"},
		{"not an array", "[secret]\nname = \"A\"\n", `p.toml:1: [[secret]] tables are an array of tables`, "each secret is its own table"},
		{"dlp action", "[dlp]\naction = \"warn\"\n", `p.toml:2: dlp action "warn": write "log"`, "two actions and off"},
		{"dlp detector", "[dlp]\ndetectors = [\"aws-key\"]\n", `p.toml:2: dlp detector "aws-key": capsem has no such detector; the detectors are aws-access-key,`, "names are package dlp's"},
		{"dlp empty", "[dlp]\ndetectors = []\n", `p.toml:2: dlp detectors = []: an empty list scans for nothing`, "say off instead"},
		{"dlp allow_hosts", "[dlp]\nallow_hosts = [\"https://a.test/\"]\n", `p.toml:2: dlp allow_hosts entry "https://a.test/"`, "names only"},
	}
	for _, c := range tests {
		_, err := Parse("p.toml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (%s):\n got %v\nwant %s", c.name, c.why, err, c.want)
		}
	}
}

func TestSecretIn(t *testing.T) {
	pol, err := Parse("p.toml", []byte(`
[[secret]]
name = "A"
from_env = "X"
hosts = ["a.test"]

[[secret]]
name = "B"
from_env = "Y"
hosts = ["b.test"]
in = ["header", "body"]
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := pol.Secrets()[0], pol.Secrets()[1]
	for _, c := range []struct {
		s    *Secret
		part string
		want bool
		why  string
	}{
		{a, SecretInHeader, true, "the default: where credentials live"},
		{a, SecretInQuery, true, "the default: an API key in the query"},
		{a, SecretInPath, false, "not by default"},
		{a, SecretInBody, false, "not by default: an upstream may say the body back"},
		{b, SecretInHeader, true, "listed"},
		{b, SecretInBody, true, "listed"},
		{b, SecretInQuery, false, "a list replaces the default"},
	} {
		if got := c.s.SubstitutesIn(c.part); got != c.want {
			t.Errorf("%s in %s: %v, want %v (%s)", c.s.Name, c.part, got, c.want, c.why)
		}
	}
}

func TestSecretFlags(t *testing.T) {
	for _, c := range []struct {
		flag  string
		hosts []string
		err   string
		why   string
	}{
		{"ANTHROPIC_API_KEY", []string{"api.anthropic.com"}, "", "a well-known name"},
		{"GH_TOKEN", []string{"github.com", "api.github.com"}, "", "two hosts"},
		{"MY_KEY@api.example.com,*.example.org", []string{"api.example.com", "*.example.org"}, "", "hosts given"},
		{"MY_KEY", nil, "capsem does not know which hosts MY_KEY belongs to", "an unknown name needs hosts"},
		{"1KEY@a.test", nil, "is not an environment variable name", "the guest's variable"},
		{"K@a.test:443", nil, "write the name without a port", "hosts as in [[secret]]"},
	} {
		s, err := ParseSecretFlag(c.flag)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s (%s): got %v, want %q", c.flag, c.why, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(s.Hosts, c.hosts) || s.FromEnv != strings.Split(c.flag, "@")[0] {
			t.Errorf("%s (%s): %+v, %v", c.flag, c.why, s, err)
		}
	}
	flag, _ := ParseSecretFlag("ANTHROPIC_API_KEY")
	src := "[[secret]]\nname = \"ANTHROPIC_API_KEY\"\nfrom_env = \"X\"\nhosts = [\"a.test\"]\n"
	if _, err := ParseWith("p.toml", []byte(src), []Secret{flag}); err == nil || !strings.Contains(err.Error(), "p.toml:1: --secret ANTHROPIC_API_KEY: this file's [[secret]]") {
		t.Errorf("a flag repeating a table: %v", err)
	}
	p, err := ParseWith("p.toml", nil, []Secret{flag})
	if err != nil || len(p.Secrets()) != 1 || !p.DecideFlow("api.anthropic.com", 443).Allowed {
		t.Errorf("a flag's secret: %v", err)
	}
}

func TestBind(t *testing.T) {
	flag, _ := ParseSecretFlag("ANTHROPIC_API_KEY")
	p, err := ParseWith("p.toml", nil, []Secret{flag})
	if err != nil {
		t.Fatal(err)
	}
	if p.Bound() {
		t.Fatal("bound before Bind")
	}
	ph := PlaceholderPrefix + strings.Repeat("a", 32)
	for _, c := range []struct {
		val SecretValue
		err string
		why string
	}{
		{SecretValue{[]byte("short"), ph}, "the real value is 5 bytes", "a short value is found by chance"},
		{SecretValue{[]byte("sk-ant-real-value"), "sk-ant-real-value-and-more"}, "contain each other", "replacing one would make the other"},
	} {
		if _, err := p.Bind(map[string]SecretValue{"ANTHROPIC_API_KEY": c.val}); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v", c.why, err)
		}
	}
	if _, err := p.Bind(nil); err == nil || !strings.Contains(err.Error(), "has no value") {
		t.Errorf("no value: %v", err)
	}
	b, err := p.Bind(map[string]SecretValue{"ANTHROPIC_API_KEY": {[]byte("sk-ant-real-value"), ph}})
	if err != nil || !b.Bound() || p.Bound() {
		t.Fatalf("Bind: %v (bound %v, the original %v)", err, b.Bound(), p.Bound())
	}
	s := b.Secrets()[0]
	if string(s.Real()) != "sk-ant-real-value" || s.InForce() != ph || !reflect.DeepEqual(b.Placeholders(), map[string]string{"ANTHROPIC_API_KEY": ph}) {
		t.Errorf("bound secret %v %q", s, b.Placeholders())
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(f, *s); strings.Contains(out, "sk-ant-real") {
			t.Errorf("%s prints the real value: %s", f, out)
		}
	}
}

func TestSecretFileRelativeToPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.toml")
	os.WriteFile(path, []byte("[[secret]]\nname = \"A\"\nfrom_file = \"k.txt\"\nhosts = [\"a.test\"]\n"), 0o600)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Secrets()[0].FromFile; got != filepath.Join(dir, "k.txt") {
		t.Errorf("from_file = %s", got)
	}
	home, _ := os.UserHomeDir()
	p = mustParse(t, "[[secret]]\nname = \"A\"\nfrom_file = \"~/k\"\nhosts = [\"a.test\"]\n")
	if got := p.Secrets()[0].FromFile; got != filepath.Join(home, "k") {
		t.Errorf("~/k = %s", got)
	}
}
