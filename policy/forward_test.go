package policy

import (
	"strings"
	"testing"
)

const forwardFile = `
[network]
allow = ["api.example.com"]

[[forward]]
name = "db.capsem.internal"
port = 5432
to = "127.0.0.1:5432"

[[forward]]
name = "DB.capsem.internal."
port = 6379
to = "[::1]:6379"

[[forward]]
name = "docker.capsem.internal"
port = 2375
to = "unix:/run/docker.sock"
`

func TestForwardDecisions(t *testing.T) {
	p, err := Parse("p.toml", []byte(forwardFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		port    uint16
		allowed bool
		reason  string
		to      string
		why     string
	}{
		{"db.capsem.internal", 5432, true, ReasonForwarded, "tcp 127.0.0.1:5432", "the table's name and port"},
		{"DB.Capsem.Internal.", 5432, true, ReasonForwarded, "tcp 127.0.0.1:5432", "names match as in every decision"},
		{"db.capsem.internal", 6379, true, ReasonForwarded, "tcp [::1]:6379", "a second table for the same name"},
		{"db.capsem.internal", 22, false, ReasonNoMatchingRule, "", "another port of a forwarded name is not forwarded"},
		{"docker.capsem.internal", 2375, true, ReasonForwarded, "unix /run/docker.sock", "a unix socket, written by the user"},
		{"x.db.capsem.internal", 5432, false, ReasonNoMatchingRule, "", "a forward is for its exact name only"},
		{"api.example.com", 443, true, ReasonAllowed, "", "[network] decides the rest"},
	} {
		d := p.DecideFlow(c.name, c.port)
		f, ok := p.Forward(c.name, c.port)
		to := ""
		if ok {
			to = f.Network + " " + f.Addr
		}
		if d.Allowed != c.allowed || d.Reason != c.reason || to != c.to {
			t.Errorf("%s:%d (%s): %+v, forward %q; want allowed %v, %s, %q", c.name, c.port, c.why, d, to, c.allowed, c.reason, c.to)
		}
	}
	if d := p.DecideName("db.capsem.internal"); !d.Allowed || d.Reason != ReasonForwarded || !strings.HasPrefix(d.Rule, "forward db.capsem.internal:5432 -> ") {
		t.Errorf("DecideName of a forwarded name: %+v", d)
	}
	if fs := p.Forwards(); len(fs) != 3 || fs[2].Rule != "forward docker.capsem.internal:2375 -> unix:/run/docker.sock" {
		t.Errorf("Forwards: %+v", fs)
	}
	if _, ok := DenyAll().Forward("db.capsem.internal", 5432); ok {
		t.Error("the empty policy forwards")
	}
}

func TestForwardErrors(t *testing.T) {
	for _, c := range []struct{ src, want, why string }{
		{"[[forward]]\nname = \"db.test\"\nport = 1\nto = \"localhost:5432\"\n", `forward to "localhost:5432": write an IP address and port`, "a host name is not resolved: what is dialled is what was written"},
		{"[[forward]]\nname = \"db.test\"\nport = 1\nto = \"127.0.0.1\"\n", `forward to "127.0.0.1": write an IP address and port`, "no port"},
		{"[[forward]]\nname = \"db.test\"\nport = 1\nto = \"unix:\"\n", `the socket's path is empty`, "an empty path"},
		{"[[forward]]\nname = \"db.test\"\nport = 1\nto = \"unix:~/s.sock\"\n", `"~" is not expanded`, "~"},
		{"[[forward]]\nname = \"*.test\"\nport = 1\nto = \"127.0.0.1:1\"\n", `not a wildcard`, "one name"},
		{"[[forward]]\nname = \"10.0.0.1\"\nport = 1\nto = \"127.0.0.1:1\"\n", `not an address`, "a name, not an address"},
		{"[[forward]]\nname = \"mcp.capsem.internal\"\nport = 443\nto = \"127.0.0.1:1\"\n", `capsem's own MCP gateway`, "capsem's own name"},
		{"[[forward]]\nname = \"db.test\"\nport = 70000\nto = \"127.0.0.1:1\"\n", `port 70000 is not a TCP port`, "out of range"},
		{"[[forward]]\nname = \"db.test\"\nto = \"127.0.0.1:1\"\n", `has no port`, "port missing"},
		{"[[forward]]\nport = 1\nto = \"127.0.0.1:1\"\n", `has no name`, "name missing"},
		{"[[forward]]\nname = \"db.test\"\nport = 1\n", `has no to`, "to missing"},
		{"[[forward]]\nname = \"db.test\"\nport = 1\nto = \"127.0.0.1:1\"\n[[forward]]\nname = \"DB.test\"\nport = 1\nto = \"127.0.0.1:2\"\n", `as "forward db.test:1 -> 127.0.0.1:1" does already`, "one name and port, one service"},
		{"[forward]\nname = \"db.test\"\n", `[[forward]] tables are an array of tables`, "one bracket"},
	} {
		_, err := Parse("p.toml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.why, err, c.want)
		}
	}
}
