package policy

import (
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsem/capsem/mitm/ca"
)

// httpPolicy exercises the [[http]] rules; DecideHTTP's Rule strings carry
// line numbers, so lines matter here.
const httpPolicy = `[network]
allow = ["api.github.com", "*.githubusercontent.com", "open.test", "*.corp.test", "pinned.example"]
deny = ["secret.corp.test"]

[[http]]
host = "api.github.com"
methods = ["GET", "head"]
paths = ["/repos/*", "/user"]
action = "allow"

[[http]]
host = "API.github.com"
action = "deny"

[[http]]
host = "*.githubusercontent.com"
methods = ["POST", "PUT", "DELETE", "PATCH"]
action = "deny"

[[http]]
host = "raw.githubusercontent.com"
methods = ["POST"]
action = "allow"

[[http]]
host = "open.test"
paths = ["/admin", "/admin/*", "/files/*.exe"]
action = "deny"

[[http]]
host = "*.corp.test"
paths = ["/public/*"]
action = "allow"

[[http]]
host = "x.corp.test"
action = "deny"

[[http]]
host = "secret.corp.test"
action = "allow"

[[http]]
host = "not-in-network.test"
action = "allow"

[tls]
passthrough = ["*.pinned.example", "pinned.example"]
`

const (
	ruleGitHubAllow = "http[1] (line 5) host=api.github.com methods=GET,head paths=/repos/*,/user action=allow"
	ruleGitHubDeny  = "http[2] (line 11) host=API.github.com action=deny"
	ruleRawDeny     = "http[3] (line 15) host=*.githubusercontent.com methods=POST,PUT,DELETE,PATCH action=deny"
	ruleOpenDeny    = "http[5] (line 25) host=open.test paths=/admin,/admin/*,/files/*.exe action=deny"
	ruleCorpAllow   = "http[6] (line 30) host=*.corp.test paths=/public/* action=allow"
	ruleCorpDeny    = "http[7] (line 35) host=x.corp.test action=deny"
)

func TestDecideHTTP(t *testing.T) {
	p := mustParse(t, httpPolicy)
	allow := func(rule string) Decision { return Decision{Allowed: true, Rule: rule, Reason: ReasonAllowed} }
	deny := func(rule string) Decision { return Decision{Rule: rule, Reason: ReasonDeniedByRule} }
	ambiguous := func(rule string) Decision { return Decision{Rule: rule, Reason: ReasonAmbiguousPath} }
	invalid := Decision{Reason: ReasonInvalidRequest}
	tests := []struct {
		host, method, path string
		want               Decision
		why                string
	}{
		// Allow list with a catch-all deny, first match wins.
		{"api.github.com", "GET", "/repos/capsem/capsem", allow(ruleGitHubAllow), "allowed method and path"},
		{"api.github.com", "HEAD", "/user", allow(ruleGitHubAllow), "exact path pattern"},
		{"api.github.com", "get", "/repos/x", allow(ruleGitHubAllow), "methods ignore case (request)"},
		{"api.github.com", "Head", "/repos/x", allow(ruleGitHubAllow), "methods ignore case (rule written \"head\")"},
		{"api.github.com", "POST", "/repos/x", deny(ruleGitHubDeny), "method not listed: falls to the catch-all"},
		{"api.github.com", "GET", "/orgs/x", deny(ruleGitHubDeny), "path not listed"},
		{"api.github.com", "GET", "/user/keys", deny(ruleGitHubDeny), "a pattern without * is exact"},
		{"api.github.com", "GET", "/repos", deny(ruleGitHubDeny), "/repos/* needs the slash"},
		{"api.github.com", "GET", "/repos/", allow(ruleGitHubAllow), "* matches the empty run"},
		{"api.github.com", "GET", "/repos/a/b/c/d", allow(ruleGitHubAllow), "* matches across /"},
		{"API.GitHub.com.", "GET", "/user", allow(ruleGitHubAllow), "host case and trailing dot"},
		{"api.github.com", "GET", "/user?admin=1", allow(ruleGitHubAllow), "the query is not matched"},
		{"api.github.com", "GET", "/user#frag", allow(ruleGitHubAllow), "nor a fragment"},
		{"api.github.com", "GET", "/orgs?/user", deny(ruleGitHubDeny), "a query cannot smuggle a path"},

		// Traversal cannot sneak into an allow rule.
		{"api.github.com", "GET", "/repos/../admin", deny(ruleGitHubDeny), "dot-dot out of an allowed prefix"},
		{"api.github.com", "GET", "/repos/x/../../admin", deny(ruleGitHubDeny), "deeper dot-dot"},
		{"api.github.com", "GET", "/repos/%2e%2e/admin", deny(ruleGitHubDeny), "encoded dot-dot"},
		{"api.github.com", "GET", "/repos/.%2E/admin", deny(ruleGitHubDeny), "half-encoded dot-dot"},
		{"api.github.com", "GET", "/repos/./x", allow(ruleGitHubAllow), "a dot segment is harmless"},
		{"api.github.com", "GET", "/repos/x/../../user", allow(ruleGitHubAllow), "traversal to another allowed path"},
		{"api.github.com", "GET", "/%75ser", allow(ruleGitHubAllow), "encoded unreserved letters are decoded"},
		{"api.github.com", "GET", "/repos/a%2fb/pulls", allow(ruleGitHubAllow), "an encoded slash that every reading allows"},
		{"api.github.com", "GET", "/repos/..%2Fadmin", ambiguous(ruleGitHubDeny), "an encoded slash that makes a dot-dot for some servers"},
		{"api.github.com", "GET", "/repos/..;/admin", ambiguous(ruleGitHubDeny), "a ;param dot-dot (Tomcat)"},
		{"api.github.com", "GET", "/repos/..\\admin", ambiguous(ruleGitHubDeny), "a backslash dot-dot (IIS)"},
		{"api.github.com", "GET", "/repos//../admin", ambiguous(ruleGitHubDeny), "// merged by some servers only"},
		{"api.github.com", "GET", "*", deny(ruleGitHubDeny), "OPTIONS * matches no path pattern"},

		// Traversal cannot sneak past a deny rule.
		{"open.test", "GET", "/", allow("open.test"), "no rule matches: the network decision stands"},
		{"open.test", "DELETE", "/anything", allow("open.test"), "any method"},
		{"open.test", "GET", "/admin", deny(ruleOpenDeny), "denied path"},
		{"open.test", "GET", "/admin/", deny(ruleOpenDeny), "trailing slash kept"},
		{"open.test", "GET", "/admin/users", deny(ruleOpenDeny), "denied subtree"},
		{"open.test", "GET", "/public/../admin", deny(ruleOpenDeny), "dot-dot into a denied path"},
		{"open.test", "GET", "/public/%2E%2E/admin/x", deny(ruleOpenDeny), "encoded dot-dot into a denied path"},
		{"open.test", "GET", "//admin", ambiguous(ruleOpenDeny), "// merged by some servers only"},
		{"open.test", "GET", "/./admin", deny(ruleOpenDeny), "dot segment"},
		{"open.test", "GET", "/%61dmin", deny(ruleOpenDeny), "encoded letter"},
		{"open.test", "GET", "/admin%2Fusers", ambiguous(ruleOpenDeny), "encoded slash: denied when decoded"},
		{"open.test", "GET", "/admin;jsessionid=1", ambiguous(ruleOpenDeny), ";params dropped by some servers"},
		{"open.test", "GET", "/\\admin", ambiguous(ruleOpenDeny), "backslash read as slash"},
		{"open.test", "GET", "/x//../admin", ambiguous(ruleOpenDeny), "// merged or not: two paths"},
		{"open.test", "GET", "/ADMIN", allow("open.test"), "paths are case-sensitive"},
		{"open.test", "GET", "/administrator", allow("open.test"), "a pattern without * is exact"},
		{"open.test", "GET", "/admin?x=1", deny(ruleOpenDeny), "query ignored"},
		{"open.test", "GET", "/files/a/b/setup.exe", deny(ruleOpenDeny), "* in the middle"},
		{"open.test", "GET", "/files/setup.exe.txt", allow("open.test"), "literal suffix after *"},
		{"open.test", "OPTIONS", "*", allow("open.test"), "OPTIONS *"},

		// Wildcard hosts and first match across patterns.
		{"raw.githubusercontent.com", "POST", "/x", deny(ruleRawDeny), "the wildcard rule comes first and wins over the later exact one"},
		{"raw.githubusercontent.com", "GET", "/x", allow("*.githubusercontent.com"), "no rule for GET: network decision"},
		{"a.b.githubusercontent.com", "delete", "/x", deny(ruleRawDeny), "wildcard at depth, method case"},
		{"x.corp.test", "GET", "/public/a", allow(ruleCorpAllow), "earlier wildcard allow beats a later exact deny"},
		{"x.corp.test", "GET", "/private", deny(ruleCorpDeny), "then the exact deny"},
		{"y.corp.test", "GET", "/private", allow("*.corp.test"), "other names under the wildcard: no rule"},
		{"corp.test", "GET", "/public/a", Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "the apex is not under the wildcard (nor allowed)"},

		// The network decision comes first.
		{"secret.corp.test", "GET", "/public/a", Decision{Allowed: false, Rule: "secret.corp.test", Reason: ReasonDeniedByRule}, "network deny beats an http allow"},
		{"not-in-network.test", "GET", "/", Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "an http allow does not widen the network policy"},
		{"evil.test", "GET", "/", Decision{Allowed: false, Rule: "", Reason: ReasonNoMatchingRule}, "unknown host"},
		{"api.github.com:443", "GET", "/user", Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "host with a port"},
		{"", "GET", "/", Decision{Allowed: false, Rule: "", Reason: ReasonInvalidName}, "empty host"},

		// Malformed requests.
		{"open.test", "", "/", invalid, "empty method"},
		{"open.test", "G ET", "/", invalid, "method with a space"},
		{"open.test", "GET\n", "/", invalid, "method with a newline"},
		{"open.test", "GÉT", "/", invalid, "non-ASCII method"},
		{"open.test", "GET", "", invalid, "empty path"},
		{"open.test", "GET", "admin", invalid, "relative path"},
		{"open.test", "GET", "http://open.test/admin", invalid, "absolute form"},
		{"open.test", "GET", "/a b", invalid, "space"},
		{"open.test", "GET", "/a\x00", invalid, "NUL"},
		{"open.test", "GET", "/admin%", invalid, "truncated escape"},
		{"open.test", "GET", "/admin%2", invalid, "truncated escape (one digit)"},
		{"open.test", "GET", "/%zzadmin", invalid, "bad escape"},
		{"open.test", "GET", "?/admin", invalid, "query only"},
	}
	for _, tc := range tests {
		got := p.DecideHTTP(tc.host, tc.method, tc.path)
		if got != tc.want {
			t.Errorf("DecideHTTP(%q, %q, %q) = %+v\n  want %+v (%s)", tc.host, tc.method, tc.path, got, tc.want, tc.why)
		}
	}
}

func TestDecideHTTPWithoutRules(t *testing.T) {
	p := mustParse(t, "[network]\nallow = [\"a.test\"]\n")
	if d := p.DecideHTTP("a.test", "DELETE", "/x/../y"); d != (Decision{Allowed: true, Rule: "a.test", Reason: ReasonAllowed}) {
		t.Errorf("no rules: %+v", d)
	}
	if d := p.DecideHTTP("a.test", "GET", "/%zz"); d.Reason != ReasonInvalidRequest {
		t.Errorf("malformed path without rules: %+v", d)
	}
	for _, q := range []*Policy{nil, DenyAll()} {
		if d := q.DecideHTTP("a.test", "GET", "/"); d != (Decision{Reason: ReasonNoMatchingRule}) {
			t.Errorf("deny-all: %+v", d)
		}
	}
}

func TestHTTPInlineForm(t *testing.T) {
	src := `network.allow = ["a.test"]
http = [
  { host = "a.test", methods = ["GET"], action = "allow" },
  { host = "a.test", action = "deny" },
]
`
	p := mustParse(t, src)
	if d := p.DecideHTTP("a.test", "GET", "/"); d != (Decision{Allowed: true, Rule: "http[1] (line 3) host=a.test methods=GET action=allow", Reason: ReasonAllowed}) {
		t.Errorf("GET: %+v", d)
	}
	if d := p.DecideHTTP("a.test", "PUT", "/"); d != (Decision{Allowed: false, Rule: "http[2] (line 4) host=a.test action=deny", Reason: ReasonDeniedByRule}) {
		t.Errorf("PUT: %+v", d)
	}
}

func TestPassthrough(t *testing.T) {
	p := mustParse(t, httpPolicy)
	for name, want := range map[string]string{
		"pinned.example":        "pinned.example",
		"PINNED.example.":       "pinned.example",
		"a.pinned.example":      "*.pinned.example",
		"a.b.pinned.example":    "*.pinned.example",
		"api.github.com":        "",
		"xpinned.example":       "",
		"pinned.example.evil":   "",
		"not a name":            "",
		"*.pinned.example":      "",
		"a.pinned.example:443":  "",
		"raw.githubusercontent": "",
	} {
		rule, ok := p.Passthrough(name)
		if rule != want || ok != (want != "") {
			t.Errorf("Passthrough(%q) = %q, %v; want %q", name, rule, ok, want)
		}
	}
	for _, q := range []*Policy{nil, DenyAll(), mustParse(t, "")} {
		if _, ok := q.Passthrough("pinned.example"); ok {
			t.Error("passthrough without entries")
		}
	}
	// The exact entry wins over a wildcard, the nearest wildcard over a
	// farther one.
	q := mustParse(t, "[tls]\npassthrough = [\"*.example\", \"*.a.example\", \"b.a.example\"]\n")
	for name, want := range map[string]string{"b.a.example": "b.a.example", "c.a.example": "*.a.example", "c.example": "*.example"} {
		if rule, _ := q.Passthrough(name); rule != want {
			t.Errorf("Passthrough(%q) = %q, want %q", name, rule, want)
		}
	}
}

func TestPreviewBytes(t *testing.T) {
	for src, want := range map[string]int{
		"":                               DefaultPreviewBytes,
		"[mitm]\n":                       DefaultPreviewBytes,
		"[mitm]\npreview_bytes = 0\n":    0,
		"[mitm]\npreview_bytes = 100\n":  100,
		"mitm.preview_bytes = 1048576\n": MaxPreviewBytes,
	} {
		if got := mustParse(t, src).PreviewBytes(); got != want {
			t.Errorf("%q: PreviewBytes() = %d, want %d", src, got, want)
		}
	}
	if DenyAll().PreviewBytes() != DefaultPreviewBytes || (*Policy)(nil).PreviewBytes() != DefaultPreviewBytes {
		t.Error("default preview size")
	}
}

func TestUpstreamCAFiles(t *testing.T) {
	p := mustParse(t, "[upstream]\nca_files = [\"/etc/a.pem\"]\n")
	got := p.UpstreamCAFiles()
	if !reflect.DeepEqual(got, []string{"/etc/a.pem"}) {
		t.Fatalf("UpstreamCAFiles() = %q", got)
	}
	got[0] = "mutated"
	if p.UpstreamCAFiles()[0] != "/etc/a.pem" {
		t.Error("UpstreamCAFiles returned the policy's own slice")
	}
	if DenyAll().UpstreamCAFiles() != nil || (*Policy)(nil).UpstreamCAFiles() != nil {
		t.Error("CA files in the empty policy")
	}
}

// TestReload checks that a new file brings its new rules and a new hash.
func TestReload(t *testing.T) {
	a := mustParse(t, "[network]\nallow = [\"a.test\"]\n")
	b := mustParse(t, "[network]\nallow = [\"a.test\"]\n[[http]]\nhost = \"a.test\"\nmethods = [\"DELETE\"]\naction = \"deny\"\n[tls]\npassthrough = [\"b.test\"]\n[mitm]\npreview_bytes = 0\n")
	if a.SHA256 == b.SHA256 {
		t.Error("same hash")
	}
	if !a.DecideHTTP("a.test", "DELETE", "/").Allowed || b.DecideHTTP("a.test", "DELETE", "/").Allowed {
		t.Error("the new [[http]] rule is not in effect")
	}
	if _, ok := b.Passthrough("b.test"); !ok || b.PreviewBytes() != 0 {
		t.Error("the new [tls] or [mitm] values are not in effect")
	}
}

func TestHTTPParseErrors(t *testing.T) {
	rule := func(lines string) string {
		return "[network]\nallow = [\"a.test\"]\n[[http]]\n" + lines // the rule's keys start on line 4
	}
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"missing action", rule("host = \"a.test\"\n"), []string{`p.toml:3: [[http]] rule 1 has no action; add action = "allow" or action = "deny"`}},
		{"missing host", rule("action = \"deny\"\n"), []string{`p.toml:3: [[http]] rule 1 has no host; add host = "api.example.com" (the name it applies to, or "*.example.com")`}},
		{"empty rule", "[[http]]\nhost = \"a.test\"\naction = \"deny\"\n\n[[http]]\n", []string{
			`p.toml:5: [[http]] rule 2 has no host; add host = "api.example.com" (the name it applies to, or "*.example.com")`,
			`p.toml:5: [[http]] rule 2 has no action; add action = "allow" or action = "deny"`,
		}},
		{"bad action", rule("host = \"a.test\"\naction = \"block\"\n"), []string{`p.toml:5: http action "block": write "allow" or "deny" (in lower case)`}},
		{"action case", rule("host = \"a.test\"\naction = \"Deny\"\n"), []string{`p.toml:5: http action "Deny": write "allow" or "deny" (in lower case)`}},
		{"bad method", rule("host = \"a.test\"\nmethods = [\"GET\",\n\"GET POST\"]\naction = \"deny\"\n"), []string{"p.toml:6: http method \"GET POST\": a method is an HTTP token (letters, digits and !#$%&'*+-.^_`|~, no spaces or commas), like \"GET\"; write one method per string"}},
		{"method comma", rule("host = \"a.test\"\nmethods = [\"GET,POST\"]\naction = \"deny\"\n"), []string{"p.toml:5: http method \"GET,POST\": a method is an HTTP token (letters, digits and !#$%&'*+-.^_`|~, no spaces or commas), like \"GET\"; write one method per string"}},
		{"empty method", rule("host = \"a.test\"\nmethods = [\"\"]\naction = \"deny\"\n"), []string{`p.toml:5: http method "": the method is empty; write a method like "GET", or remove the entry`}},
		{"repeated method", rule("host = \"a.test\"\nmethods = [\"GET\", \"get\"]\naction = \"deny\"\n"), []string{`p.toml:5: http method "get" repeats "GET" on line 5 (methods ignore case); remove one of them`}},
		{"relative path", rule("host = \"a.test\"\npaths = [\"repos/*\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "repos/*": a path pattern starts with "/", like "/repos/*"`}},
		{"url path", rule("host = \"a.test\"\npaths = [\"https://a.test/x\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "https://a.test/x": this looks like a URL; write only the path, like "/repos/*" (the name goes in host)`}},
		{"empty path", rule("host = \"a.test\"\npaths = [\"\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "": the pattern is empty; write a path like "/repos/*", or remove the entry`}},
		{"query in path", rule("host = \"a.test\"\npaths = [\"/search?q=*\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "/search?q=*": paths are matched without the query string; remove "?" and what follows`}},
		{"fragment in path", rule("host = \"a.test\"\npaths = [\"/a#b\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "/a#b": a fragment ("#…") is never sent to the server; remove it`}},
		{"escape in path", rule("host = \"a.test\"\npaths = [\"/a%2Fb\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "/a%2Fb": write characters, not percent-escapes: request paths are matched after decoding the escapes of letters, digits and "-._~"; use "*" in place of other characters`}},
		{"space in path", rule("host = \"a.test\"\npaths = [\"/a b\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "/a b": the pattern contains whitespace, which a request path never does; use "*" in its place, or write one pattern per string`}},
		{"bad char in path", rule("host = \"a.test\"\npaths = [\"/a\\\\b\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "/a\\b": the character "\\" cannot appear unencoded in a request path; use "*" in its place`}},
		{"unclean path", rule("host = \"a.test\"\npaths = [\"/a/../admin/*\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "/a/../admin/*": the pattern is not in clean form (it has a "//", "." or ".." segment) and would never match, since request paths are cleaned before matching; write "/admin/*"`}},
		{"double slash path", rule("host = \"a.test\"\npaths = [\"//admin\"]\naction = \"deny\"\n"), []string{`p.toml:5: http path "//admin": the pattern is not in clean form (it has a "//", "." or ".." segment) and would never match, since request paths are cleaned before matching; write "/admin"`}},
		{"repeated path", rule("host = \"a.test\"\npaths = [\"/a\",\n\"/a\"]\naction = \"deny\"\n"), []string{`p.toml:6: http path "/a" repeats "/a" on line 5; remove one of them`}},
		{"bad host", rule("host = \"foo*.test\"\naction = \"deny\"\n"), []string{`p.toml:4: http host "foo*.test": a wildcard must be a whole leading label, like "*.example.com"`}},
		{"host with port", rule("host = \"a.test:8080\"\naction = \"deny\"\n"), []string{`p.toml:4: http host "a.test:8080": write the name without a port: [[http]] rules apply on every port the name is allowed on`}},
		{"host with path", rule("host = \"a.test/admin\"\naction = \"deny\"\n"), []string{`p.toml:4: http host "a.test/admin": write only the host name here, like "example.com"; a path goes in paths = ["/…"] of an [[http]] rule`}},
		{"host url", rule("host = \"https://a.test\"\naction = \"deny\"\n"), []string{`p.toml:4: http host "https://a.test": this looks like a URL; write only the host name, like "example.com" (with ":8080" for a port other than 443)`}},
		{"host ip", rule("host = \"10.0.0.1\"\naction = \"deny\"\n"), []string{`p.toml:4: http host "10.0.0.1": ` + ipHelp}},
		{"host star", rule("host = \"*\"\naction = \"deny\"\n"), []string{`p.toml:4: http host "*": a bare "*" would allow or deny every name; capsem is default-deny: list the names themselves, or "*.example.com" for the subdomains of one`}},
		{"unknown key", rule("host = \"a.test\"\nmethod = [\"GET\"]\naction = \"deny\"\n"), []string{`p.toml:5: unknown key "method" in [[http]]: did you mean "methods"? the keys of [[http]] are host, methods, paths, action; remove or rename it`}},
		{"unknown key inline", "http = [{ host = \"a.test\", action = \"deny\" },\n  { host = \"a.test\", acton = \"deny\" }]\n", []string{`p.toml:2: unknown key "acton" in [[http]]: did you mean "action"? the keys of [[http]] are host, methods, paths, action; remove or rename it`}},
		{"key of http elsewhere", "[network]\nhost = \"a.test\"\n", []string{`p.toml:2: key "host" belongs in the [[http]] table, not in [network]; move it under a "[[http]]" line`}},
		{"single table", "[network]\nallow = [\"a.test\"]\n[http]\nhost = \"a.test\"\naction = \"deny\"\n", []string{`p.toml:3: [[http]] rules are an array of tables: start each rule with a "[[http]]" line (two brackets), then its keys`}},
		{"dotted keys", "http.host = \"a.test\"\nhttp.action = \"deny\"\n", []string{
			`p.toml:1: [[http]] rules are an array of tables: start each rule with a "[[http]]" line (two brackets), then its keys`,
			`p.toml:2: [[http]] rules are an array of tables: start each rule with a "[[http]]" line (two brackets), then its keys`,
		}},
		{"inline table", "\nhttp = { host = \"a.test\", action = \"deny\" }\n", []string{`p.toml:2: [[http]] rules must be tables, each started by a "[[http]]" line, with host and action strings and methods and paths arrays of strings; found an inline table`}},
		{"http not a table", "http = \"a.test\"\n", []string{`p.toml:1: [[http]] rules must be tables, each started by a "[[http]]" line, with host and action strings and methods and paths arrays of strings; found a string`}},
		{"host type", rule("host = 1\naction = \"deny\"\n"), []string{`p.toml:4: http.host must be a string, like host = "api.example.com"; found an integer`}},
		{"methods type", rule("host = \"a.test\"\nmethods = \"GET\"\naction = \"deny\"\n"), []string{`p.toml:5: http.methods must be an array of strings, like methods = ["GET", "HEAD"]; found a string`}},
		{"paths type", rule("host = \"a.test\"\npaths = [1]\naction = \"deny\"\n"), []string{`p.toml:5: http.paths must be an array of strings, like paths = ["/repos/*"]; found an integer`}},
		{"action type", rule("host = \"a.test\"\naction = false\n"), []string{`p.toml:5: http.action must be the string "allow" or "deny", like action = "deny"; found a boolean`}},
		{"missing host after another table", "[[http]]\naction = \"deny\"\n[tls]\npassthrough = [\"x*\"]\n", []string{
			`p.toml:1: [[http]] rule 1 has no host; add host = "api.example.com" (the name it applies to, or "*.example.com")`,
			`p.toml:4: passthrough entry "x*": a wildcard must be a whole leading label, like "*.example.com"`,
		}},
		{"upper-case key", rule("Host = \"a.test\"\naction = \"deny\"\n"), []string{`p.toml:4: key "Host" must be written in lower case, as "host"`}},
		{"several", "[[http]]\nhost = \"a.test:1\"\nmethods = [\"\"]\npaths = [\"x\"]\naction = \"maybe\"\n", []string{
			`p.toml:2: http host "a.test:1": write the name without a port: [[http]] rules apply on every port the name is allowed on`,
			`p.toml:3: http method "": the method is empty; write a method like "GET", or remove the entry`,
			`p.toml:4: http path "x": a path pattern starts with "/", like "/repos/*"`,
			`p.toml:5: http action "maybe": write "allow" or "deny" (in lower case)`,
		}},

		// [tls].
		{"passthrough bad", "[tls]\npassthrough = [\"a.test\",\n\"a*.test\"]\n", []string{`p.toml:3: passthrough entry "a*.test": a wildcard must be a whole leading label, like "*.example.com"`}},
		{"passthrough port", "[tls]\npassthrough = [\"a.test:443\"]\n", []string{`p.toml:2: passthrough entry "a.test:443": write the name without a port: passthrough applies on every port the name is allowed on`}},
		{"passthrough empty", "[tls]\npassthrough = [\"\"]\n", []string{`p.toml:2: passthrough entry "": the entry is empty; remove it`}},
		{"passthrough repeat", "[tls]\npassthrough = [\"*.a.test\",\n\"*.A.test.\"]\n", []string{`p.toml:3: passthrough entry "*.A.test." repeats "*.a.test" on line 2; remove one of them`}},
		{"passthrough type", "[tls]\npassthrough = \"a.test\"\n", []string{`p.toml:2: tls.passthrough must be an array of strings, like passthrough = ["pinned.example.com"]; found a string`}},
		{"passthrough unknown key", "[tls]\npasthrough = []\n", []string{`p.toml:2: unknown key "pasthrough" in [tls]: did you mean "passthrough"? the keys of [tls] are passthrough; remove or rename it`}},
		{"passthrough covers http", "[[http]]\nhost = \"api.a.test\"\naction = \"deny\"\n[tls]\npassthrough = [\"b.test\", \"*.a.test\"]\n", []string{`p.toml:5: passthrough entry "*.a.test" covers names of the [[http]] rule whose host is "api.a.test" (line 2): passthrough traffic is not decrypted, so that rule could not apply; remove one of them`}},
		{"passthrough inside http wildcard", "[tls]\npassthrough = [\"x.a.test\"]\n[[http]]\nhost = \"*.a.test\"\naction = \"deny\"\n", []string{`p.toml:2: passthrough entry "x.a.test" covers names of the [[http]] rule whose host is "*.a.test" (line 4): passthrough traffic is not decrypted, so that rule could not apply; remove one of them`}},
		{"passthrough same wildcard", "[tls]\npassthrough = [\"*.b.a.test\"]\n[[http]]\nhost = \"*.a.test\"\naction = \"deny\"\n", []string{`p.toml:2: passthrough entry "*.b.a.test" covers names of the [[http]] rule whose host is "*.a.test" (line 4): passthrough traffic is not decrypted, so that rule could not apply; remove one of them`}},

		// [mitm].
		{"preview negative", "[mitm]\n\npreview_bytes = -1\n", []string{`p.toml:3: mitm.preview_bytes = -1: write a number of bytes from 0 (no previews) to 1048576 (1 MiB); the default is 4096`}},
		{"preview too big", "[mitm]\npreview_bytes = 1048577\n", []string{`p.toml:2: mitm.preview_bytes = 1048577: write a number of bytes from 0 (no previews) to 1048576 (1 MiB); the default is 4096`}},
		{"preview type", "[mitm]\npreview_bytes = \"4k\"\n", []string{`p.toml:2: mitm.preview_bytes must be a whole number of bytes, without quotes, like preview_bytes = 4096; found a string`}},
		{"preview float", "[mitm]\npreview_bytes = 4096.0\n", []string{`p.toml:2: mitm.preview_bytes must be a whole number of bytes, without quotes, like preview_bytes = 4096; found a float`}},
		{"mitm unknown key", "[mitm]\npreview = 1\n", []string{`p.toml:2: unknown key "preview" in [mitm]: the keys of [mitm] are preview_bytes; remove or rename it`}},
		{"preview at top level", "preview_bytes = 1\n", []string{`p.toml:1: key "preview_bytes" belongs in the [mitm] table, not at the top level; move it under a "[mitm]" line`}},
		{"mitm array", "[[mitm]]\n", []string{`p.toml:1: [mitm] must be a table: a "[mitm]" line followed by its keys; found an array table`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("p.toml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", p)
			}
			if got := errLines(err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("error:\n got  %q\n want %q", got, tc.want)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.File != "p.toml" {
				t.Errorf("errors.As(*Error) = %+v", pe)
			}
		})
	}
}

// TestPassthroughNoConflict checks names near an [[http]] host that do not
// overlap it.
func TestPassthroughNoConflict(t *testing.T) {
	mustParse(t, "[[http]]\nhost = \"api.a.test\"\naction = \"deny\"\n[tls]\npassthrough = [\"a.test\", \"*.api.a.test\", \"xapi.a.test\", \"*.b.test\"]\n")
	mustParse(t, "[[http]]\nhost = \"*.a.test\"\naction = \"deny\"\n[tls]\npassthrough = [\"a.test\", \"*.xa.test\"]\n")
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"/", "/", true},
		{"/", "/a", false},
		{"/*", "/", true},
		{"/*", "/a/b/c", true},
		{"/a*", "/a", true},
		{"/a*", "/b", false},
		{"/a/*/c", "/a/b/x/c", true},
		{"/a/*/c", "/a/c", false},
		{"/a/*/c", "/a//c", true},
		{"*.exe", "/x.exe", true},
		{"*.exe", "/x.exe/y", false},
		{"/*a*a*a*a*b", "/" + strings.Repeat("a", 200), false},
		{"/**", "/x", true},
		{"/a", "/A", false},
	} {
		if got := globMatch(tc.pat, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pat, tc.s, got)
		}
	}
}

func TestPathViews(t *testing.T) {
	for in, want := range map[string][]string{
		"/a/b":           {"/a/b"},
		"*":              {"*"},
		"/a/":            {"/a/"},
		"/a/../b/":       {"/b/"},
		"/a/.":           {"/a", "/a/"},
		"/%41%2f%2E":     {"/A%2F.", "/A", "/A/"},
		"/a//b":          {"/a/b", "/a//b"},
		"/..;/x":         {"/..;/x", "/x"},
		"/a\\..\\b":      {"/a\\..\\b", "/b"},
		"/%2e%2e/%2e%2E": {"/"},
	} {
		var views [4]string
		n := pathViews(in, &views)
		if got := views[:n]; !reflect.DeepEqual(got, want) {
			t.Errorf("pathViews(%q) = %q, want %q", in, got, want)
		}
	}
}

// testCertPEM returns a fresh CA certificate in PEM, made by mitm/ca.
func testCertPEM(t testing.TB) []byte {
	t.Helper()
	a, err := ca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return a.CertPEM()
}

func TestLoadCAFilesPEM(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good := testCertPEM(t)
	write("good.pem", append(append([]byte("# a comment\n"), good...), testCertPEM(t)...))
	write("with-key.pem", append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}}), good...))
	write("empty.pem", nil)
	write("text.pem", []byte("not a certificate\n"))
	write("key-only.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}}))
	write("broken.pem", append(append([]byte{}, good...), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 0x03, 1, 2, 3}})...))

	write("ok.toml", []byte("[upstream]\nca_files = [\"good.pem\", \""+filepath.Join(dir, "with-key.pem")+"\"]\n"))
	p, err := Load(filepath.Join(dir, "ok.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.UpstreamCAFiles(), []string{filepath.Join(dir, "good.pem"), filepath.Join(dir, "with-key.pem")}; !reflect.DeepEqual(got, want) {
		t.Errorf("UpstreamCAFiles() = %q, want %q", got, want)
	}

	write("bad.toml", []byte("[upstream]\nca_files = [\n  \"empty.pem\",\n  \"text.pem\",\n  \"key-only.pem\",\n  \"broken.pem\",\n  \"good.pem\",\n]\n"))
	_, err = Load(filepath.Join(dir, "bad.toml"))
	bad := filepath.Join(dir, "bad.toml")
	const noCert = ` holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" block); name a PEM file of CA certificates`
	got := errLines(err)
	want := []string{
		bad + ":3: ca_files entry: " + filepath.Join(dir, "empty.pem") + noCert,
		bad + ":4: ca_files entry: " + filepath.Join(dir, "text.pem") + noCert,
		bad + ":5: ca_files entry: " + filepath.Join(dir, "key-only.pem") + noCert,
	}
	if len(got) != 4 || !reflect.DeepEqual(got[:3], want) ||
		!strings.HasPrefix(got[3], bad+":6: ca_files entry: certificate 2 of "+filepath.Join(dir, "broken.pem")+" does not parse (") ||
		!strings.HasSuffix(got[3], "); replace it with a valid PEM certificate") {
		t.Errorf("got %q\nwant %q and one for broken.pem", got, want)
	}
}
