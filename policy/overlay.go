package policy

// The overlay is what a person answered "always" to when capsem asked,
// kept beside a sandbox (<data>/sandboxes/NAME/policy-asked.toml) and laid
// over its policy file at every start and reload (WithGrants). Capsem
// writes it whole at each "always"; a person may edit it, and removing a
// line takes that answer back at the next reload:
//
//	# What a person allowed "always" when capsem asked (capsem ask NAME).
//	# Laid over the sandbox's policy at every start and reload; remove an
//	# entry to take it back, then: capsem policy reload NAME
//	[network]
//	allow = [
//	  "pypi.org",
//	  "files.example.com:8080",
//	]
//
//	[[mcp.rules]]
//	server = "github"
//	tools = ["create_issue"]
//	action = "allow"
//
// Stability: every later capsem reads it back at a start. Keys may be
// added, never renamed. Only these keys are accepted, and only allow:
// anything else (a deny, a secret, an [[http]] rule) belongs in the
// policy file, where a person reads it.

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	toml "github.com/pelletier/go-toml/v2"
)

// overlayFile is the overlay's TOML.
type overlayFile struct {
	Network struct {
		Allow []string `toml:"allow"`
	} `toml:"network"`
	MCP struct {
		Rules []struct {
			Server string   `toml:"server"`
			Tools  []string `toml:"tools"`
			Action string   `toml:"action"`
		} `toml:"rules"`
	} `toml:"mcp"`
}

// ParseOverlay reads an overlay file's bytes (name is how errors name
// it). What it allows is checked when WithGrants lays it over a policy.
func ParseOverlay(name string, data []byte) (Grants, error) {
	var f overlayFile
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var sme *toml.StrictMissingError
		if errors.As(err, &sme) {
			return Grants{}, fmt.Errorf("policy: %s: the overlay holds only [network] allow and [[mcp.rules]] allow rules (server, tools, action); move the rest into the sandbox's policy file:\n%s", name, sme.String())
		}
		return Grants{}, fmt.Errorf("policy: %s: %w", name, err)
	}
	g := Grants{Network: f.Network.Allow}
	for i, r := range f.MCP.Rules {
		if r.Action != "allow" {
			return Grants{}, fmt.Errorf("policy: %s: [[mcp.rules]] rule %d: action = %q; the overlay only allows (write action = \"allow\"), a deny rule belongs in the policy file", name, i+1, r.Action)
		}
		if r.Server == "" || len(r.Tools) == 0 {
			return Grants{}, fmt.Errorf("policy: %s: [[mcp.rules]] rule %d: write its server and tools, like server = \"github\" and tools = [\"create_issue\"]", name, i+1)
		}
		for _, t := range r.Tools {
			g.MCP = append(g.MCP, MCPGrant{Server: r.Server, Tool: t})
		}
	}
	return g, nil
}

// FormatOverlay is the overlay file of g, for sandbox (its name in the
// header's advice). go-toml quotes the values: an MCP tool's name is the
// guest's to choose.
func FormatOverlay(sandbox string, g Grants) ([]byte, error) {
	for _, e := range g.Entries() {
		if !utf8.ValidString(e) {
			return nil, fmt.Errorf("policy: the overlay: %q is not UTF-8, which a TOML file cannot hold; it is not kept", e)
		}
	}
	for _, e := range g.Network {
		if e == "" {
			return nil, errors.New("policy: the overlay: an empty entry is not kept")
		}
	}
	for _, m := range g.MCP {
		if m.Server == "" || m.Tool == "" {
			return nil, fmt.Errorf("policy: the overlay: an MCP grant needs a server and a tool (%q, %q); it is not kept", m.Server, m.Tool)
		}
	}
	var f overlayFile
	f.Network.Allow = g.Network
	for _, m := range g.MCP {
		f.MCP.Rules = append(f.MCP.Rules, struct {
			Server string   `toml:"server"`
			Tools  []string `toml:"tools"`
			Action string   `toml:"action"`
		}{m.Server, []string{m.Tool}, "allow"})
	}
	body, err := toml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("policy: the overlay: %w", err)
	}
	head := "# What a person allowed \"always\" when capsem asked (capsem ask " + sandbox + ").\n" +
		"# Laid over the sandbox's policy at every start and reload; remove an\n" +
		"# entry to take it back, then: capsem policy reload " + sandbox + "\n"
	return append([]byte(head), body...), nil
}
