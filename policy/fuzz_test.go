package policy

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var errLineRE = regexp.MustCompile(`^fuzz\.toml:([1-9][0-9]*): \S`)

var reasons = map[string]bool{ReasonAllowed: true, ReasonDeniedByRule: true, ReasonNoMatchingRule: true, ReasonPortNotAllowed: true, ReasonInvalidName: true}

// FuzzParse checks that Parse never panics, that every error names the file
// and a line of it, and that the decisions of any accepted policy are
// consistent with each other.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		briefExample,
		matchPolicy,
		"[network]\nallow = [\"*.a.test\", \"b.test:8080\"]\ndeny = [\"x.a.test\", \"b.test:8080\"]\n",
		"[upstream]\nresolve = { \"a.test\" = \"[::1]:8443\", \"b.test\" = \"c.test\" }\nca_files = [\"a.pem\"]\nallow_private = true\n",
		"network.allow = ['a.test']\nupstream.resolve.\"a.test\" = '10.0.0.1:1'\n",
		"[network]\nallow = [\n  \"a.test\", # c\n]\n",
		"[[network]]\n[Network]\nalow = 1\n",
		"[network]\nallow = [\"foo*.com\", \"10.0.0.1\", \"x:0\"]\n",
		"a = { b = { c = [1, [2, {d = 3}]] } }\n",
		"\ufeff[network]\r\ndefault = \"deny\"\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.toml", data)
		if err != nil {
			if p != nil {
				t.Fatal("policy and error both returned")
			}
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("internal error: %v", err)
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			for _, l := range strings.Split(err.Error(), "\n") {
				m := errLineRE.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("error line without file:line: %q", l)
				}
				if n, _ := strconv.Atoi(m[1]); n > lines {
					t.Fatalf("error on line %d of a %d-line file: %q", n, lines, l)
				}
			}
			return
		}
		allow, deny := p.Rules()
		check := func(name string, port uint16) {
			flow := p.DecideFlow(name, port)
			dns := p.DecideName(name)
			if !reasons[flow.Reason] || !reasons[dns.Reason] {
				t.Fatalf("unknown reason: %+v %+v", flow, dns)
			}
			if flow.Allowed != (flow.Reason == ReasonAllowed) || dns.Allowed != (dns.Reason == ReasonAllowed) {
				t.Fatalf("Allowed and Reason disagree: %+v %+v", flow, dns)
			}
			if flow.Allowed && !dns.Allowed {
				t.Fatalf("%s:%d allowed but its name is not: %+v", name, port, dns)
			}
			p.Resolve(name)
		}
		for _, e := range append(allow, deny...) {
			host, port := e, uint16(DefaultPort)
			if i := strings.LastIndexByte(e, ':'); i >= 0 {
				host = e[:i]
				n, _ := strconv.Atoi(e[i+1:])
				port = uint16(n)
			}
			if strings.HasPrefix(host, "*.") {
				host = "sub." + host[2:]
			}
			check(host, port)
			check(host, port+1)
			check(strings.ToUpper(host)+".", port)
		}
		for _, e := range allow {
			// An exact allow entry allows its name and port, unless denied.
			if strings.HasPrefix(e, "*.") {
				continue
			}
			host, port := e, uint16(DefaultPort)
			if i := strings.LastIndexByte(e, ':'); i >= 0 {
				host = e[:i]
				n, _ := strconv.Atoi(e[i+1:])
				port = uint16(n)
			}
			if d := p.DecideFlow(host, port); !d.Allowed && d.Reason != ReasonDeniedByRule {
				t.Fatalf("allow entry %q: DecideFlow(%q, %d) = %+v", e, host, port, d)
			}
		}
		check(string(data), 443)
	})
}
