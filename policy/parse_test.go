package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// briefExample is the policy of the design brief, verbatim.
const briefExample = `[network]
default = "deny"                      # the only default capsem ships
allow = ["api.anthropic.com", "*.githubusercontent.com", "pypi.org:443", "example.test:8080"]
deny  = ["uploads.github.com"]        # deny wins over allow
[upstream]
resolve = { "api.anthropic.com" = "127.0.0.1:8443" }   # where to really connect for a name
ca_files = []                          # extra roots for verifying upstream TLS
allow_private = false
`

func TestParseExample(t *testing.T) {
	p := mustParse(t, briefExample)
	allow, deny := p.Rules()
	if want := []string{"api.anthropic.com", "*.githubusercontent.com", "pypi.org:443", "example.test:8080"}; !reflect.DeepEqual(allow, want) {
		t.Errorf("allow = %q", allow)
	}
	if want := []string{"uploads.github.com"}; !reflect.DeepEqual(deny, want) {
		t.Errorf("deny = %q", deny)
	}
	if tg, ok := p.Resolve("api.anthropic.com"); !ok || tg != (Target{Host: "127.0.0.1", Port: 8443, Pinned: true}) {
		t.Errorf("Resolve = %+v, %v", tg, ok)
	}
	if p.AllowPrivate || len(p.CAFiles) != 0 || p.Source != "p.toml" {
		t.Errorf("AllowPrivate=%v CAFiles=%q Source=%q", p.AllowPrivate, p.CAFiles, p.Source)
	}
	sum := sha256.Sum256([]byte(briefExample))
	if p.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA256 = %s", p.SHA256)
	}
	if !p.DecideFlow("api.anthropic.com", 443).Allowed || p.DecideFlow("uploads.github.com", 443).Allowed {
		t.Error("example decisions wrong")
	}
}

func TestSHA256(t *testing.T) {
	a := mustParse(t, "[network]\nallow = [\"a.test\"]\n")
	b := mustParse(t, "[network]\nallow = [\"a.test\"] # same rules, other bytes\n")
	if len(a.SHA256) != 64 || a.SHA256 == b.SHA256 {
		t.Errorf("SHA256 %q vs %q", a.SHA256, b.SHA256)
	}
	if e := mustParse(t, ""); e.SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("SHA256 of the empty file = %s", e.SHA256)
	}
	if DenyAll().SHA256 != "" || DenyAll().Source != "" {
		t.Error("DenyAll has a source")
	}
}

// TestParseForms writes the same policy in the ways TOML allows and checks
// that they all mean the same thing.
func TestParseForms(t *testing.T) {
	forms := []string{
		"[network]\nallow = [\"a.test\", \"b.test:8080\"]\ndeny = [\"x.a.test\"]\n[upstream]\nresolve = { \"a.test\" = \"127.0.0.1\" }\n",
		"network.allow = [\"a.test\", \"b.test:8080\"]\nnetwork.deny = [\"x.a.test\"]\nupstream.resolve.\"a.test\" = \"127.0.0.1\"\n",
		"network = { allow = [\"a.test\", \"b.test:8080\"], deny = [\"x.a.test\"] }\nupstream = { resolve = { \"a.test\" = \"127.0.0.1\" } }\n",
		"[network]\nallow = [\n  \"a.test\", # first\n  \"b.test:8080\",\n]\ndeny = ['x.a.test']\n[upstream.resolve]\n'a.test' = '127.0.0.1'\n",
		"\ufeff[network]\r\nallow = [\"a.test\", \"b.test:8080\"]\r\ndeny = [\"x.a.test\"]\r\n[upstream]\r\nresolve.\"a.test\" = \"127.0.0.1\"\r\n",
	}
	for i, src := range forms {
		p := mustParse(t, src)
		allow, deny := p.Rules()
		tg, ok := p.Resolve("a.test")
		if !reflect.DeepEqual(allow, []string{"a.test", "b.test:8080"}) || !reflect.DeepEqual(deny, []string{"x.a.test"}) ||
			!ok || tg.Host != "127.0.0.1" || !p.DecideFlow("b.test", 8080).Allowed {
			t.Errorf("form %d: allow=%q deny=%q resolve=%+v,%v", i, allow, deny, tg, ok)
		}
	}
}

func errLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

const ipHelp = "IP addresses cannot be allowed or denied: the guest reaches hosts only by name through capsem's DNS and direct-IP traffic is always refused; list the host name instead (to send a name to a fixed address, add it to [upstream] resolve)"

// TestParseErrors checks every kind of error, its file:line and its text.
func TestParseErrors(t *testing.T) {
	allowAt4 := func(entry string) string {
		return "# a policy\n\n[network]\nallow = [\"ok.test\", \"" + entry + "\"]\n"
	}
	tests := []struct {
		name string
		src  string
		want []string
	}{
		// TOML syntax, duplicates and types, from go-toml.
		{"syntax", "[network]\nallow = [\"a.test\"\n", []string{`p.toml:2: invalid TOML at column 18: array is incomplete; fix the syntax (see https://toml.io)`}},
		{"syntax table", "\n[network\n", []string{`p.toml:2: invalid TOML at column 9: expected ']' to close table name; fix the syntax (see https://toml.io)`}},
		{"duplicate key", "[network]\nallow = [\"a.test\"]\n\nallow = [\"b.test\"]\n", []string{`p.toml:4: key allow is already defined: a key or table may appear only once; merge the two into one`}},
		{"duplicate table", "[network]\n[upstream]\n[network]\n", []string{`p.toml:3: table network already exists: a key or table may appear only once; merge the two into one`}},
		{"allow not an array", "[network]\nallow = \"a.test\"\n", []string{`p.toml:2: network.allow must be an array of strings, like allow = ["example.com", "pypi.org:443"]; found a string`}},
		{"allow element type", "[network]\nallow = [\n\"a.test\",\n443,\n]\n", []string{`p.toml:4: network.allow must be an array of strings, like allow = ["example.com", "pypi.org:443"]; found an integer`}},
		{"deny type", "[network]\ndeny = [true]\n", []string{`p.toml:2: network.deny must be an array of strings, like deny = ["uploads.example.com"]; found a boolean`}},
		{"default type", "[network]\ndefault = false\n", []string{`p.toml:2: network.default must be the string "deny", like default = "deny"; found a boolean`}},
		{"network type", "network = \"deny\"\n", []string{`p.toml:1: [network] must be a table: a "[network]" line followed by its keys; found a string`}},
		{"array table", "[[network]]\n", []string{`p.toml:1: [network] must be a table: a "[network]" line followed by its keys; found an array table`}},
		{"resolve dotted key", "[upstream]\nresolve.api.example.com = \"127.0.0.1\"\n", []string{`p.toml:2: upstream.resolve must map quoted host names to strings, like resolve = { "api.example.com" = "127.0.0.1:8443" } (quote names: a dotted key makes nested tables); found a table`}},
		{"resolve value type", "[upstream]\nresolve = { \"a.test\" = 8443 }\n", []string{`p.toml:2: upstream.resolve must map quoted host names to strings, like resolve = { "api.example.com" = "127.0.0.1:8443" } (quote names: a dotted key makes nested tables); found an integer`}},
		{"ca_files type", "[upstream]\nca_files = \"roots.pem\"\n", []string{`p.toml:2: upstream.ca_files must be an array of path strings, like ca_files = ["roots.pem"]; found a string`}},
		{"allow_private type", "[upstream]\n\nallow_private = \"yes\"\n", []string{`p.toml:3: upstream.allow_private must be true or false, without quotes; found a string`}},

		// Keys.
		{"unknown key", "[network]\nallow = []\nalow = []\n", []string{`p.toml:3: unknown key "alow" in [network]: did you mean "allow"? the keys of [network] are default, allow, deny, unknown, ask_timeout; remove or rename it`}},
		{"unknown key no hint", "[upstream]\nvia = \"x\"\n", []string{`p.toml:2: unknown key "via" in [upstream]: the keys of [upstream] are resolve, ca_files, allow_private, proxy, no_proxy, proxy_secret; remove or rename it`}},
		{"unknown table", "[netwrok]\nallow = []\n", []string{`p.toml:1: unknown table or key "netwrok": did you mean "network"? the policy file has only the tables [network], [upstream], [[http]], [tls], [mitm], [dns], [[secret]], [dlp], [mcp], [quic] and [[forward]]; remove or rename it`}},
		{"unknown nested table", "[network.extra]\nx = 1\n", []string{`p.toml:1: unknown key "extra" in [network]: the keys of [network] are default, allow, deny, unknown, ask_timeout; remove or rename it`}},
		{"unknown key in inline table", "\nnetwork = { allow = [], alow = [] }\n", []string{`p.toml:2: unknown key "alow" in [network]: did you mean "allow"? the keys of [network] are default, allow, deny, unknown, ask_timeout; remove or rename it`}},
		{"unknown dotted key", "\n\nnetwork.extra.deep = 1\n", []string{`p.toml:3: unknown key "extra" in [network]: the keys of [network] are default, allow, deny, unknown, ask_timeout; remove or rename it`}},
		{"nested array", "[network]\n\nallow = [[\"a.test\"]]\n", []string{`p.toml:3: network.allow must be an array of strings, like allow = ["example.com", "pypi.org:443"]; found an array`}},
		{"key at top level", "allow = [\"a.test\"]\n", []string{`p.toml:1: key "allow" belongs in the [network] table, not at the top level; move it under a "[network]" line`}},
		{"key in wrong table", "[network]\nallow_private = true\n", []string{`p.toml:2: key "allow_private" belongs in the [upstream] table, not in [network]; move it under a "[upstream]" line`}},
		{"upper-case keys", "[Network]\nAllow = [\"a.test\"]\n", []string{
			`p.toml:1: key "Network" must be written in lower case, as "network"`,
			`p.toml:2: key "Allow" must be written in lower case, as "allow"`,
		}},
		{"several unknown keys", "[network]\nx = 1\n[upstream]\ny = 2\n", []string{
			`p.toml:2: unknown key "x" in [network]: the keys of [network] are default, allow, deny, unknown, ask_timeout; remove or rename it`,
			`p.toml:4: unknown key "y" in [upstream]: the keys of [upstream] are resolve, ca_files, allow_private, proxy, no_proxy, proxy_secret; remove or rename it`,
		}},

		// network.default.
		{"default allow", "[network]\ndefault = \"allow\"\n", []string{`p.toml:2: network.default = "allow": capsem is default-deny and "deny" is the only accepted default; remove the key or set it to "deny", and list what the guest may reach in network.allow`}},
		{"default Deny", "\n[network]\ndefault = \"Deny\"\n", []string{`p.toml:3: network.default = "Deny": capsem is default-deny and "deny" is the only accepted default; remove the key or set it to "deny", and list what the guest may reach in network.allow`}},

		// Entries: globs.
		{"partial wildcard", allowAt4("foo*.com"), []string{`p.toml:4: allow entry "foo*.com": a wildcard must be a whole leading label, like "*.example.com"`}},
		{"inner wildcard", allowAt4("a.*.b"), []string{`p.toml:4: allow entry "a.*.b": a wildcard must be a whole leading label, like "*.example.com"`}},
		{"double star", allowAt4("**.x"), []string{`p.toml:4: allow entry "**.x": a wildcard must be a whole leading label, like "*.example.com"`}},
		{"two wildcards", allowAt4("*.*.x"), []string{`p.toml:4: allow entry "*.*.x": a wildcard must be a whole leading label, like "*.example.com"`}},
		{"star dot", allowAt4("*."), []string{`p.toml:4: allow entry "*.": "*." must be followed by a domain, like "*.example.com"`}},
		{"star", allowAt4("*"), []string{`p.toml:4: allow entry "*": a bare "*" would allow or deny every name; capsem is default-deny: list the names themselves, or "*.example.com" for the subdomains of one`}},
		{"empty", allowAt4(""), []string{`p.toml:4: allow entry "": the entry is empty; remove it`}},
		{"blank", allowAt4(" "), []string{`p.toml:4: allow entry " ": the entry is blank; remove it`}},
		{"space", allowAt4("a.test b.test"), []string{`p.toml:4: allow entry "a.test b.test": the entry contains whitespace; write one name per string, like "example.com"`}},
		{"url", allowAt4("http://x.test"), []string{`p.toml:4: allow entry "http://x.test": this looks like a URL; write only the host name, like "example.com" (with ":8080" for a port other than 443)`}},
		{"path", allowAt4("x.test/api"), []string{`p.toml:4: allow entry "x.test/api": capsem's network policy matches host names and ports, not paths; write only the host name, like "example.com"`}},
		{"userinfo", allowAt4("u@x.test"), []string{`p.toml:4: allow entry "u@x.test": write only the host name, like "example.com", without user information`}},
		{"empty label", allowAt4("a..test"), []string{`p.toml:4: allow entry "a..test": the name has an empty label (two dots in a row, or a trailing ".."); remove the extra dot`}},
		{"leading dot", allowAt4(".example.com"), []string{`p.toml:4: allow entry ".example.com": a leading "." is not a wildcard here; write "example.com" for the name itself and "*.example.com" for its subdomains`}},
		{"leading hyphen", allowAt4("-a.test"), []string{`p.toml:4: allow entry "-a.test": the label "-a" starts or ends with "-", which DNS does not allow`}},
		{"trailing hyphen", allowAt4("*.a-.test"), []string{`p.toml:4: allow entry "*.a-.test": the label "a-" starts or ends with "-", which DNS does not allow`}},
		{"bad char", allowAt4("ex!ample.com"), []string{`p.toml:4: allow entry "ex!ample.com": the character "!" is not allowed in a host name; use only letters, digits, "-", "_" and dots`}},
		{"non-ascii", allowAt4("bücher.de"), []string{`p.toml:4: allow entry "bücher.de": the name has non-ASCII characters; write internationalized names in their punycode ("xn--…") form`}},
		{"long label", allowAt4(strings.Repeat("a", 64) + ".test"), []string{`p.toml:4: allow entry "` + strings.Repeat("a", 64) + `.test": the label "` + strings.Repeat("a", 64) + `" is longer than 63 characters, the most DNS allows`}},
		{"long name", allowAt4(strings.Repeat("abcdefghi.", 25) + "test"), []string{`p.toml:4: allow entry "` + strings.Repeat("abcdefghi.", 25) + `test": the name is 254 characters long; a DNS name has at most 253`}},

		// Entries: IP literals.
		{"ipv4", allowAt4("10.0.0.1"), []string{`p.toml:4: allow entry "10.0.0.1": ` + ipHelp}},
		{"ipv4 port", allowAt4("10.0.0.1:443"), []string{`p.toml:4: allow entry "10.0.0.1:443": ` + ipHelp}},
		{"ipv6", allowAt4("::1"), []string{`p.toml:4: allow entry "::1": ` + ipHelp}},
		{"ipv6 port", allowAt4("[::1]:443"), []string{`p.toml:4: allow entry "[::1]:443": ` + ipHelp}},
		{"short ipv4", allowAt4("127.1"), []string{`p.toml:4: allow entry "127.1": ` + ipHelp}},
		{"deny ip", "[network]\ndeny = [\"169.254.169.254\"]\n", []string{`p.toml:2: deny entry "169.254.169.254": ` + ipHelp}},
		{"numeric wildcard", allowAt4("*.10"), []string{`p.toml:4: allow entry "*.10": the name ends in a number, so it reads as an IP address. ` + ipHelp}},

		// Entries: ports.
		{"port 0", allowAt4("x.test:0"), []string{`p.toml:4: allow entry "x.test:0": the port "0" must be a number from 1 to 65535 (without leading zeros)`}},
		{"port too big", allowAt4("x.test:65536"), []string{`p.toml:4: allow entry "x.test:65536": the port "65536" must be a number from 1 to 65535 (without leading zeros)`}},
		{"port name", allowAt4("x.test:https"), []string{`p.toml:4: allow entry "x.test:https": the port "https" must be a number from 1 to 65535 (without leading zeros)`}},
		{"port leading zero", allowAt4("x.test:0443"), []string{`p.toml:4: allow entry "x.test:0443": the port "0443" must be a number from 1 to 65535 (without leading zeros)`}},
		{"port negative", "[network]\ndeny = [\"x.test:-1\"]\n", []string{`p.toml:2: deny entry "x.test:-1": the port "-1" must be a number from 1 to 65535 (without leading zeros)`}},
		{"port missing", allowAt4("x.test:"), []string{`p.toml:4: allow entry "x.test:": the ':' is not followed by a port; write "name:port", like "example.com:8080", or drop the ':' for port 443`}},
		{"two colons", allowAt4("x.test:443:443"), []string{`p.toml:4: allow entry "x.test:443:443": the entry has more than one ':'; write "name" for port 443 or "name:port" for another port`}},

		// Entries: duplicates and conflicts.
		{"duplicate allow", "[network]\nallow = [\n  \"a.test\",\n  \"b.test\",\n  \"A.test.:443\",\n]\n", []string{`p.toml:5: allow entry "A.test.:443" repeats "a.test" on line 3; remove one of them`}},
		{"duplicate wildcard", "[network]\nallow = [\"*.a.test\",\n\"*.A.TEST\"]\n", []string{`p.toml:3: allow entry "*.A.TEST" repeats "*.a.test" on line 2; remove one of them`}},
		{"duplicate deny", "[network]\ndeny = [\"a.test\",\n\n\"a.test\"]\n", []string{`p.toml:4: deny entry "a.test" repeats "a.test" on line 2; remove one of them`}},
		{"duplicate deny port", "[network]\ndeny = [\"a.test:80\", \"a.test:80\"]\n", []string{`p.toml:2: deny entry "a.test:80" repeats "a.test:80" on line 2; remove one of them`}},
		{"deny cancels allow", "[network]\nallow = [\"a.test:8080\"]\ndeny = [\"a.test\"]\n", []string{`p.toml:3: deny entry "a.test" cancels allow entry "a.test:8080" on line 2 (deny wins); remove one of them`}},
		{"deny port cancels allow", "[network]\nallow = [\"a.test\"]\ndeny = [\"a.test:443\"]\n", []string{`p.toml:3: deny entry "a.test:443" cancels allow entry "a.test" on line 2 (deny wins); remove one of them`}},
		{"deny before allow", "[network]\ndeny = [\"*.a.test\"]\nallow = [\"*.a.test\"]\n", []string{`p.toml:2: deny entry "*.a.test" cancels allow entry "*.a.test" on line 3 (deny wins); remove one of them`}},
		{"redundant port deny", "[network]\ndeny = [\"a.test:80\",\n\"a.test\"]\n", []string{`p.toml:2: deny entry "a.test:80" is redundant: "a.test" on line 3 denies every port of the name; remove "a.test:80"`}},
		{"redundant port deny after", "[network]\ndeny = [\"a.test\",\n\"a.test:80\"]\n", []string{`p.toml:3: deny entry "a.test:80" is redundant: "a.test" on line 2 denies every port of the name; remove "a.test:80"`}},

		// upstream.resolve.
		{"resolve wildcard key", "[upstream]\nresolve = { \"*.a.test\" = \"127.0.0.1\" }\n", []string{`p.toml:2: resolve key "*.a.test": keys must be exact host names, not wildcards; add one key per name`}},
		{"resolve ip key", "[upstream.resolve]\n\"10.0.0.1\" = \"127.0.0.1\"\n", []string{`p.toml:2: resolve key "10.0.0.1": keys are the host names the guest uses, not IP addresses; write the name, like "api.example.com"`}},
		{"resolve bad key", "[upstream.resolve]\n\"a b\" = \"127.0.0.1\"\n", []string{`p.toml:2: resolve key "a b": the name contains whitespace; write one name per string, like "example.com"`}},
		{"resolve duplicate key", "[upstream.resolve]\n\"a.test\" = \"127.0.0.1\"\n\"A.test.\" = \"127.0.0.2\"\n", []string{`p.toml:3: resolve key "A.test." names the same host as "a.test" on line 2 (names ignore case and a trailing dot); remove one of them`}},
		{"resolve key line", "[upstream]\nresolve = {\n  \"ok.test\" = \"127.0.0.1\",\n  \"b@d.test\" = \"127.0.0.1\",\n  \"c.test\" = \"127.0.0.1\" }\n", []string{`p.toml:4: resolve key "b@d.test": the character "@" is not allowed in a host name; use only letters, digits, "-", "_" and dots`}},
		{"resolve value line", "[upstream]\nresolve = {\n  \"b.test\" = \"127.0.0.1\", # \"127.0.0.1:0\"\n  \"a.test\" = \"127.0.0.1:0\" }\n", []string{`p.toml:4: resolve target "127.0.0.1:0" for "a.test": the port "0" must be a number from 1 to 65535 (without leading zeros)`}},
		{"resolve empty", "[upstream.resolve]\n\"a.test\" = \"\"\n", []string{`p.toml:2: resolve target "" for "a.test": the target is empty; write an address like "127.0.0.1:8443" or a host name like "backend.internal:443"`}},
		{"resolve url", "[upstream.resolve]\n\"a.test\" = \"https://b.test\"\n", []string{`p.toml:2: resolve target "https://b.test" for "a.test": this looks like a URL; write only host[:port], like "127.0.0.1:8443" or "backend.internal"`}},
		{"resolve partial ip", "[upstream.resolve]\n\"a.test\" = \"10.0.1\"\n", []string{`p.toml:2: resolve target "10.0.1" for "a.test": "10.0.1" is neither a complete IP address nor a host name; write a full address like "127.0.0.1" or a name`}},
		{"resolve unspecified", "[upstream.resolve]\n\"a.test\" = \"0.0.0.0:443\"\n", []string{`p.toml:2: resolve target "0.0.0.0:443" for "a.test": 0.0.0.0 is the unspecified address and cannot be connected to; write the address of the upstream server`}},
		{"resolve multicast", "[upstream.resolve]\n\"a.test\" = \"224.0.0.1\"\n", []string{`p.toml:2: resolve target "224.0.0.1" for "a.test": 224.0.0.1 is a multicast address; write the unicast address of the upstream server`}},
		{"resolve zone", "[upstream.resolve]\n\"a.test\" = \"[fe80::1%eth0]:443\"\n", []string{`p.toml:2: resolve target "[fe80::1%eth0]:443" for "a.test": IPv6 zones ("%eth0") are not supported; write the address without a zone`}},
		{"resolve open bracket", "[upstream.resolve]\n\"a.test\" = \"[::1\"\n", []string{`p.toml:2: resolve target "[::1" for "a.test": the "[" is not closed; write an IPv6 address with a port as "[::1]:8443"`}},
		{"resolve bracket name", "[upstream.resolve]\n\"a.test\" = \"[b.test]:443\"\n", []string{`p.toml:2: resolve target "[b.test]:443" for "a.test": "b.test" is not an IPv6 address; brackets are only for IPv6 addresses, like "[::1]:8443"`}},
		{"resolve after bracket", "[upstream.resolve]\n\"a.test\" = \"[::1]443\"\n", []string{`p.toml:2: resolve target "[::1]443" for "a.test": after "]" only ":port" may follow, like "[::1]:8443"`}},
		{"resolve colons", "[upstream.resolve]\n\"a.test\" = \"b.test:1:2\"\n", []string{`p.toml:2: resolve target "b.test:1:2" for "a.test": the target has several ':' but is not an IPv6 address; write "[IPv6]:port", "IPv4:port" or "host:port"`}},
		{"resolve no host", "[upstream.resolve]\n\"a.test\" = \":443\"\n", []string{`p.toml:2: resolve target ":443" for "a.test": the host is missing before the ':'; write "host:port", like "127.0.0.1:8443"`}},
		{"resolve no port", "[upstream.resolve]\n\"a.test\" = \"b.test:\"\n", []string{`p.toml:2: resolve target "b.test:" for "a.test": the ':' is not followed by a port; write "host:port", like "127.0.0.1:8443", or drop the ':' to keep the guest's port`}},
		{"resolve bad host", "[upstream.resolve]\n\"a.test\" = \"b_.test-:443\"\n", []string{`p.toml:2: resolve target "b_.test-:443" for "a.test": the label "test-" starts or ends with "-", which DNS does not allow`}},

		// upstream.ca_files.
		{"ca empty", "[upstream]\nca_files = [\"a.pem\",\n\"\"]\n", []string{`p.toml:3: ca_files entry "": the path is empty; write the path of a PEM file, or remove the entry`}},
		{"ca tilde", "[upstream]\nca_files = [\"~/a.pem\"]\n", []string{`p.toml:2: ca_files entry "~/a.pem": "~" is not expanded; write the full path, or a path relative to the policy file's directory`}},
		{"ca duplicate", "[upstream]\nca_files = [\"a.pem\",\n\"./a.pem\"]\n", []string{`p.toml:3: ca_files entry "./a.pem" repeats "a.pem" on line 2 (both are a.pem); remove one of them`}},

		// Several problems: all reported, by line.
		{"several", "[upstream]\nca_files = [\"\"]\n[network]\ndeny = [\"x*\"]\nallow = [\"a.test:0\"]\nbogus = 1\n", []string{
			`p.toml:2: ca_files entry "": the path is empty; write the path of a PEM file, or remove the entry`,
			`p.toml:4: deny entry "x*": a wildcard must be a whole leading label, like "*.example.com"`,
			`p.toml:5: allow entry "a.test:0": the port "0" must be a number from 1 to 65535 (without leading zeros)`,
			`p.toml:6: unknown key "bogus" in [network]: the keys of [network] are default, allow, deny, unknown, ask_timeout; remove or rename it`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("p.toml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", p)
			}
			if p != nil {
				t.Errorf("Parse returned a policy with an error")
			}
			got := errLines(err)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("error:\n got  %q\n want %q", got, tc.want)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.File != "p.toml" || !strings.HasPrefix(got[0], pe.Error()) {
				t.Errorf("errors.As(*Error) = %+v", pe)
			}
		})
	}
}

// TestErrorLineIgnoresLookalikes checks that an error points at the value
// itself, not at the same text in a comment, a key or another key's value.
func TestErrorLineIgnoresLookalikes(t *testing.T) {
	src := `# never write "foo*.com" in allow
[upstream]
ca_files = ["foo*.com"]          # a valid (odd) file name
resolve = { "x.test" = "foo.com" }
[network]
deny = ["bar.foo.com"]
allow = [
  "ok.test",  # "foo*.com"
  'foo.com:8080', "foo*.com",
]
`
	_, err := Parse("p.toml", []byte(src))
	want := []string{`p.toml:9: allow entry "foo*.com": a wildcard must be a whole leading label, like "*.example.com"`}
	if got := errLines(err); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	// The same bad value under two keys: each error on its own line.
	src = "[network]\ndeny = [\"a.test:0\"]\n\nallow = [\"a.test:0\"]\n"
	_, err = Parse("p.toml", []byte(src))
	want = []string{
		`p.toml:2: deny entry "a.test:0": the port "0" must be a number from 1 to 65535 (without leading zeros)`,
		`p.toml:4: allow entry "a.test:0": the port "0" must be a number from 1 to 65535 (without leading zeros)`,
	}
	if got := errLines(err); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	// Escapes: the value differs from its text in the file.
	src = "[network]\nallow = [\"ok.test\"]\ndeny = [\n\"a\\u002Atest\"]\n"
	_, err = Parse("p.toml", []byte(src))
	want = []string{`p.toml:4: deny entry "a*test": a wildcard must be a whole leading label, like "*.example.com"`}
	if got := errLines(err); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestErrorsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("[network]\nallow = [\n")
	for range 60 {
		b.WriteString("\"bad*\",\n")
	}
	b.WriteString("]\n")
	_, err := Parse("p.toml", []byte(b.String()))
	got := errLines(err)
	if len(got) != maxErrors {
		t.Fatalf("%d errors, want %d", len(got), maxErrors)
	}
	if !strings.HasPrefix(got[0], "p.toml:3: ") || !strings.HasPrefix(got[49], "p.toml:52: ") || !strings.HasSuffix(got[49], "(and 10 more problems after this one)") {
		t.Errorf("first %q, last %q", got[0], got[49])
	}
}

func TestEmptyAndCommentsOnly(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# only a comment\n", "[upstream]\nca_files = []\n", "\ufeff"} {
		p := mustParse(t, src)
		if d := p.DecideFlow("api.anthropic.com", 443); d.Allowed {
			t.Errorf("%q allows: %+v", src, d)
		}
	}
}

func TestCAFilesRelative(t *testing.T) {
	p, err := Parse("/etc/capsem/policy.toml", []byte("[upstream]\nca_files = [\"roots.pem\", \"/abs/other.pem\", \"sub/../third.pem\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/capsem/roots.pem", "/abs/other.pem", "/etc/capsem/third.pem"}
	if !reflect.DeepEqual(p.CAFiles, want) {
		t.Errorf("CAFiles = %q, want %q", p.CAFiles, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conf", "certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conf", "certs", "roots.pem"), testCertPEM(t), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "[network]\nallow = [\"a.test\"]\n[upstream]\nca_files = [\"certs/roots.pem\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "conf", "policy.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)

	p, err := Load(filepath.Join("conf", "policy.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "conf", "policy.toml"); p.Source != want {
		t.Errorf("Source = %q, want %q", p.Source, want)
	}
	if want := []string{filepath.Join(dir, "conf", "certs", "roots.pem")}; !reflect.DeepEqual(p.CAFiles, want) {
		t.Errorf("CAFiles = %q, want %q", p.CAFiles, want)
	}
	sum := sha256.Sum256([]byte(src))
	if p.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA256 = %s", p.SHA256)
	}
	if !p.DecideFlow("a.test", 443).Allowed {
		t.Error("a.test denied")
	}

	// Missing and non-regular CA files are reported at their line, with
	// the path as the user gave it.
	bad := "[upstream]\nca_files = [\n  \"certs/roots.pem\",\n  \"missing.pem\",\n  \"certs\",\n]\n"
	if err := os.WriteFile(filepath.Join(dir, "conf", "bad.toml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load("conf/bad.toml")
	want := []string{
		"conf/bad.toml:4: ca_files entry: " + filepath.Join(dir, "conf", "missing.pem") + " does not exist; fix the path (relative paths are relative to the policy file's directory)",
		"conf/bad.toml:5: ca_files entry: " + filepath.Join(dir, "conf", "certs") + " is not a regular file; name a PEM file of CA certificates",
	}
	if got := errLines(err); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}

	// Parse errors through Load name the file as given.
	if err := os.WriteFile(filepath.Join(dir, "conf", "syntax.toml"), []byte("[network]\nallow = [\"*\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("conf/syntax.toml"); err == nil || !strings.HasPrefix(err.Error(), "conf/syntax.toml:2: allow entry \"*\": ") {
		t.Errorf("Load error = %v", err)
	}

	if _, err := Load("conf/none.toml"); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "conf/none.toml") {
		t.Errorf("Load of a missing file: %v", err)
	}
}
