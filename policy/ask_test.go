package policy

import (
	"strings"
	"testing"
	"time"
)

const askPolicy = `
[network]
allow = ["known.test", "*.wild.test", "web.test:8080"]
deny = ["bad.test", "web.test:9090"]
unknown = "ask"
ask_timeout = 5

[mcp]
unknown = "ask"

[[mcp.rules]]
server = "mcp.known.test"
tools = ["read_*"]
action = "allow"

[[mcp.rules]]
server = "mcp.known.test"
tools = ["delete"]
action = "deny"
`

func TestAskDecisions(t *testing.T) {
	p := mustParse(t, askPolicy)
	if p.NetworkAskTimeout() != 5*time.Second || p.MCPAskTimeout() != DefaultAskTimeout {
		t.Errorf("timeouts %v %v", p.NetworkAskTimeout(), p.MCPAskTimeout())
	}
	tests := []struct {
		name string
		port uint16 // 0: DecideName
		want Decision
		why  string
	}{
		{"unknown.test", 0, Decision{Reason: ReasonNoMatchingRule, Ask: true}, "no entry names it: ask"},
		{"unknown.test", 443, Decision{Reason: ReasonNoMatchingRule, Ask: true}, "a flow to it too"},
		{"known.test", 0, Decision{Allowed: true, Rule: "known.test", Reason: ReasonAllowed}, "allowed: nobody is asked"},
		{"known.test", 80, Decision{Rule: "known.test", Reason: ReasonPortNotAllowed, Ask: true}, "a port the file did not foresee: ask"},
		{"bad.test", 0, Decision{Rule: "bad.test", Reason: ReasonDeniedByRule}, "a deny entry is the file's answer: never asked"},
		{"web.test", 9090, Decision{Rule: "web.test:9090", Reason: ReasonDeniedByRule}, "a denied port is never asked"},
		{"not a name", 0, Decision{Reason: ReasonInvalidName}, "an invalid name is never asked"},
		{"a.wild.test", 0, Decision{Allowed: true, Rule: "*.wild.test", Reason: ReasonAllowed}, "a wildcard allows"},
	}
	for _, tc := range tests {
		var got Decision
		if tc.port == 0 {
			got = p.DecideName(tc.name)
		} else {
			got = p.DecideFlow(tc.name, tc.port)
		}
		if got != tc.want {
			t.Errorf("%s:%d = %+v, want %+v (%s)", tc.name, tc.port, got, tc.want, tc.why)
		}
	}
	mcp := []struct {
		server, tool string
		want         Decision
		why          string
	}{
		{"mcp.known.test", "read_file", Decision{Allowed: true, Rule: "mcp.rules[1] (line 11) server=mcp.known.test tools=read_* action=allow", Reason: ReasonAllowed}, "a rule allows"},
		{"mcp.known.test", "delete", Decision{Rule: "mcp.rules[2] (line 16) server=mcp.known.test tools=delete action=deny", Reason: ReasonMCPToolDenied}, "a rule denies: never asked"},
		{"mcp.known.test", "write", Decision{Reason: ReasonNoMatchingRule, Ask: true}, "no rule names it: ask"},
	}
	for _, tc := range mcp {
		if got := p.DecideMCPTool(tc.server, tc.tool); got != tc.want {
			t.Errorf("%s %s = %+v, want %+v (%s)", tc.server, tc.tool, got, tc.want, tc.why)
		}
	}
	if !p.MCPMayDeny("other.test") {
		t.Error("MCPMayDeny: with unknown = ask a server no rule names may be refused")
	}
}

func TestUnknownDefaults(t *testing.T) {
	p := mustParse(t, "[network]\nallow = [\"a.test\"]\n")
	if d := p.DecideName("b.test"); d.Ask || d.Reason != ReasonNoMatchingRule {
		t.Errorf("default [network] unknown: %+v, want a plain denial", d)
	}
	if d := p.DecideMCPTool("a.test", "x"); !d.Allowed {
		t.Errorf("default [mcp] unknown: %+v, want allowed (as before [mcp] unknown existed)", d)
	}
	p = mustParse(t, "[mcp]\nunknown = \"deny\"\n")
	if d := p.DecideMCPTool("a.test", "x"); d.Allowed || d.Ask || d.Reason != ReasonNoMatchingRule {
		t.Errorf("[mcp] unknown = deny: %+v", d)
	}
	for _, bad := range []struct{ src, want string }{
		{"[network]\nunknown = \"allow\"\n", `network.unknown = "allow": write "deny" or "ask"`},
		{"[network]\nask_timeout = 601\n", "network.ask_timeout = 601: write the seconds a question waits"},
		{"[mcp]\nunknown = \"maybe\"\n", `mcp.unknown = "maybe": write "allow", "deny" or "ask"`},
	} {
		if _, err := Parse("p.toml", []byte(bad.src)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.src, err, bad.want)
		}
	}
}

func TestWithGrants(t *testing.T) {
	p := mustParse(t, askPolicy)
	q, err := p.WithGrants(Grants{Network: []string{"new.test", "known.test:80", "bad.test"}, MCP: []MCPGrant{{"mcp.known.test", "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pol  *Policy
		name string
		port uint16
		want Decision
		why  string
	}{
		{q, "new.test", 443, Decision{Allowed: true, Rule: "asked: new.test", Reason: ReasonAllowed}, "a grant allows, and says so"},
		{q, "new.test", 0, Decision{Allowed: true, Rule: "asked: new.test", Reason: ReasonAllowed}, "its name resolves"},
		{q, "new.test", 80, Decision{Rule: "asked: new.test", Reason: ReasonPortNotAllowed, Ask: true}, "a grant without a port is 443's, like an allow entry"},
		{q, "known.test", 80, Decision{Allowed: true, Rule: "asked: known.test:80", Reason: ReasonAllowed}, "a port of an allowed name"},
		{q, "known.test", 443, Decision{Allowed: true, Rule: "known.test", Reason: ReasonAllowed}, "the file's entry still decides first"},
		{q, "bad.test", 443, Decision{Rule: "bad.test", Reason: ReasonDeniedByRule}, "the file's deny wins over a grant"},
		{p, "new.test", 443, Decision{Reason: ReasonNoMatchingRule, Ask: true}, "the policy granted over is unchanged"},
	}
	for _, tc := range tests {
		var got Decision
		if tc.port == 0 {
			got = tc.pol.DecideName(tc.name)
		} else {
			got = tc.pol.DecideFlow(tc.name, tc.port)
		}
		if got != tc.want {
			t.Errorf("%s:%d = %+v, want %+v (%s)", tc.name, tc.port, got, tc.want, tc.why)
		}
	}
	if d := q.DecideMCPTool("mcp.known.test", "write"); !d.Allowed || d.Rule != "asked: server=mcp.known.test tools=write" {
		t.Errorf("MCP grant: %+v", d)
	}
	if d := q.DecideMCPTool("mcp.known.test", "delete"); d.Allowed {
		t.Errorf("a rule's deny wins over a grant: %+v", d)
	}
	star, err := p.WithGrants(Grants{MCP: []MCPGrant{{"mcp.known.test", "*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := star.DecideMCPTool("mcp.known.test", "write"); d.Allowed || !d.Ask {
		t.Errorf("a grant of the tool the guest called \"*\" allows write: %+v; a grant names one tool, exactly", d)
	}
	if d := star.DecideMCPTool("mcp.known.test", "*"); !d.Allowed {
		t.Errorf("the tool called \"*\" itself: %+v", d)
	}
	if !star.MCPMayDeny("mcp.known.test") {
		t.Error("MCPMayDeny: an exact grant of \"*\" is not a rule for every tool")
	}
	if q.SHA256 == p.SHA256 || q.fileSHA256() != p.SHA256 {
		t.Errorf("SHA256 %s, file %s; the file's %s", q.SHA256, q.fileSHA256(), p.SHA256)
	}
	r, err := q.WithGrants(Grants{Network: []string{"new.test", "two.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if g := r.Grants(); len(g.Network) != 4 || g.Network[3] != "two.test" || len(g.MCP) != 1 {
		t.Errorf("grants of a granted policy: %+v, want the first three, then two.test, once each", g)
	}
	if _, err := p.WithGrants(Grants{Network: []string{"bad name!"}}); err == nil || !strings.Contains(err.Error(), `allowed entry "bad name!"`) {
		t.Errorf("a bad entry: %v", err)
	}
	var nilPol *Policy
	if d, err := nilPol.WithGrants(Grants{Network: []string{"x.test"}}); err != nil || !d.DecideName("x.test").Allowed {
		t.Errorf("grants over no policy: %v", err)
	}
}

func TestOverlay(t *testing.T) {
	g := Grants{Network: []string{"pypi.org", "a.test:8080"}, MCP: []MCPGrant{{"github", `evil"] [x`}}}
	b, err := FormatOverlay("dev", g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "capsem policy reload dev") {
		t.Errorf("the header says how to take an entry back:\n%s", b)
	}
	back, err := ParseOverlay("o.toml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(back.Network) != 2 || back.Network[1] != "a.test:8080" || len(back.MCP) != 1 || back.MCP[0] != g.MCP[0] {
		t.Errorf("round trip: %+v, want %+v", back, g)
	}
	for _, bad := range []struct{ src, want, why string }{
		{"[network]\ndeny = [\"x.test\"]\n", "the overlay holds only [network] allow", "a deny belongs in the policy file"},
		{"[[secret]]\nname = \"K\"\n", "the overlay holds only", "a secret belongs in the policy file"},
		{"[[mcp.rules]]\nserver = \"s\"\ntools = [\"t\"]\naction = \"deny\"\n", `action = "deny"; the overlay only allows`, "the overlay only allows"},
		{"[[mcp.rules]]\nserver = \"s\"\naction = \"allow\"\n", "write its server and tools", "every tool of a server is the file's to allow"},
		{"[network\n", "o.toml", "a syntax error names the file"},
	} {
		if _, err := ParseOverlay("o.toml", []byte(bad.src)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q (%s)", bad.src, err, bad.want, bad.why)
		}
	}
}
