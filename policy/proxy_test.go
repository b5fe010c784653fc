package policy

import (
	"strings"
	"testing"
)

func TestProxyParse(t *testing.T) {
	const secret = "\n[[secret]]\nname = \"CORP_PROXY\"\nfrom_env = \"CORP_PROXY\"\n"
	cases := []struct {
		why     string
		src     string
		addr    string // want: the proxy's address ("": no proxy)
		wantErr string
	}{
		{"a proxy with a secret that names no hosts: it goes to the proxy only",
			"[upstream]\nproxy = \"http://proxy.corp:3128\"\nproxy_secret = \"CORP_PROXY\"\nno_proxy = [\"*.corp.example\", \"git.local\"]\n" + secret,
			"proxy.corp:3128", ""},
		{"an IPv6 proxy is dialled bracketed", "[upstream]\nproxy = \"http://[fd00::1]:8080\"\n", "[fd00::1]:8080", ""},
		{"no proxy: upstream connections go direct", "[upstream]\nallow_private = false\n", "", ""},
		{"credentials in the URL would sit in a file anyone reading the policy sees",
			"[upstream]\nproxy = \"http://alice:s3cret@proxy:3128\"\n", "", "go in a [[secret]] named by proxy_secret"},
		{"an https proxy is not spoken to", "[upstream]\nproxy = \"https://proxy:3128\"\n", "", "plain HTTP (CONNECT"},
		{"no port: capsem does not guess 80 or 3128", "[upstream]\nproxy = \"http://proxy\"\n", "", "write the proxy's port, like \"http://proxy:3128\""},
		{"a path is not part of a proxy's address", "[upstream]\nproxy = \"http://proxy:3128/x\"\n", "", "without a path"},
		{"proxy_secret must name a secret", "[upstream]\nproxy = \"http://p:1\"\nproxy_secret = \"NOPE\"\n", "", `proxy_secret "NOPE" names no [[secret]]`},
		{"proxy_secret alone does nothing", "[upstream]\nproxy_secret = \"CORP_PROXY\"\n" + secret, "", "without proxy"},
		{"no_proxy entries are host names", "[upstream]\nproxy = \"http://p:1\"\nno_proxy = [\"a.test:443\"]\n", "", "write the name without a port"},
		{"a secret that is not the proxy's still needs hosts", "[upstream]\nproxy = \"http://p:1\"\n" + secret, "", "has no hosts"},
	}
	for _, c := range cases {
		p, err := Parse("p.toml", []byte("[network]\nallow = [\"a.test\"]\n"+c.src))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want %q", c.why, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.why, err)
			continue
		}
		got := ""
		if x := p.Proxy(); x != nil {
			got = x.Addr
		}
		if got != c.addr {
			t.Errorf("%s: proxy %q, want %q", c.why, got, c.addr)
		}
	}
}

func TestProxyBypassAndCredentials(t *testing.T) {
	p, err := Parse("p.toml", []byte(`[network]
allow = ["a.test"]
[upstream]
proxy = "http://proxy.corp:3128"
proxy_secret = "CORP_PROXY"
no_proxy = ["*.corp.example", "git.local"]
[[secret]]
name = "CORP_PROXY"
from_env = "CORP_PROXY"
`))
	if err != nil {
		t.Fatal(err)
	}
	x := p.Proxy()
	for _, c := range []struct {
		name   string
		bypass bool
		why    string
	}{
		{"git.local", true, "an exact entry"},
		{"GIT.local.", true, "names ignore case and a trailing dot"},
		{"build.corp.example", true, "under a wildcard"},
		{"corp.example", false, "a wildcard does not name its base"},
		{"api.anthropic.com", false, "everything else goes through the proxy"},
	} {
		if got := x.Bypass(c.name); got != c.bypass {
			t.Errorf("Bypass(%q) = %v: %s", c.name, got, c.why)
		}
	}
	if p.ProxyCredentials() != nil {
		t.Error("credentials before Bind")
	}
	b, err := p.Bind(map[string]SecretValue{"CORP_PROXY": {Real: []byte("alice:s3cret"), Placeholder: "capsem-placeholder-proxy-0123"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b.ProxyCredentials()); got != "alice:s3cret" {
		t.Errorf("credentials %q", got)
	}
}
