package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/capsem/capsem/dlp"
)

// Secret is one credential the guest never holds: a [[secret]] table, or a
// --secret flag (Line 0). The guest gets Name=Placeholder in its
// environment; the MITM puts the real value in place of the placeholder in
// requests to the secret's hosts only, refuses requests that carry it
// anywhere else, and turns the real value in their responses back into the
// placeholder.
//
// The policy holds where the real value comes from, never the value until
// Bind is given it; Bound secrets keep it unexported, and String and
// GoString never show it.
type Secret struct {
	Name     string   // the environment variable the guest sees
	FromEnv  string   // the host environment variable holding the real value, or ""
	FromFile string   // the file whose first line is the real value (absolute, ~ expanded), or ""
	Hosts    []string // the only hosts that receive the real value, as written
	// Placeholder is the fixed placeholder of the file; "" means one is
	// made for each session (SessionPlaceholder).
	Placeholder string
	// In is where in a request to the secret's hosts the placeholder is
	// replaced by the real value (SecretIn*), as written; empty means
	// DefaultSecretIn.
	In   []string
	Line int // the [[secret]] table's line; 0 for a --secret flag

	hosts []entry
	real  []byte // set by Bind
	ph    string // the placeholder in force, set by Bind
	phDNS string // ph in lower case: as a DNS name holds it
}

// PlaceholderPrefix starts every placeholder capsem makes; 32 random hex
// digits follow. Defined in dlp, whose Scrub redacts them.
const PlaceholderPrefix = dlp.PlaceholderPrefix

// MinSecretBytes is the shortest real value accepted: a shorter one would be
// found by chance in ordinary traffic, refusing it as a leak.
const MinSecretBytes = 8

// minPlaceholderBytes is the shortest fixed placeholder accepted, for the
// same reason.
const minPlaceholderBytes = 16

// WellKnownSecretHosts are the hosts a --secret NAME without @HOST binds:
// the API hosts of the providers whose variables agents read.
//
// Stability: users rely on these bindings from the command line; a name's
// hosts never shrink.
var WellKnownSecretHosts = map[string][]string{
	"ANTHROPIC_API_KEY": {"api.anthropic.com"},
	"OPENAI_API_KEY":    {"api.openai.com"},
	"GEMINI_API_KEY":    {"generativelanguage.googleapis.com"},
	"GOOGLE_API_KEY":    {"generativelanguage.googleapis.com"},
	"GITHUB_TOKEN":      {"github.com", "api.github.com"},
	"GH_TOKEN":          {"github.com", "api.github.com"},
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseSecretFlag reads a --secret value, NAME[@HOST[,HOST…]]: a secret
// named NAME whose real value is the host's variable NAME, bound to the
// hosts given or, without @, to the WellKnownSecretHosts of NAME.
func ParseSecretFlag(v string) (Secret, error) {
	name, hostList, hasHosts := strings.Cut(v, "@")
	if !envName.MatchString(name) {
		return Secret{}, fmt.Errorf("--secret %q: %q is not an environment variable name (letters, digits and _, not starting with a digit); write --secret NAME or --secret NAME@host.example.com", v, name)
	}
	s := Secret{Name: name, FromEnv: name}
	if !hasHosts {
		hosts, ok := WellKnownSecretHosts[name]
		if !ok {
			known := make([]string, 0, len(WellKnownSecretHosts))
			for k := range WellKnownSecretHosts {
				known = append(known, k)
			}
			slices.Sort(known)
			return Secret{}, fmt.Errorf("--secret %s: capsem does not know which hosts %s belongs to; name them: --secret %s@api.example.com[,other.example.com] (known without hosts: %s)", name, name, name, strings.Join(known, ", "))
		}
		s.Hosts = slices.Clone(hosts)
	} else {
		for h := range strings.SplitSeq(hostList, ",") {
			s.Hosts = append(s.Hosts, strings.TrimSpace(h))
		}
	}
	for _, h := range s.Hosts {
		e, problem := parseHostOnly(h, "the real value goes to the host on port 443")
		if problem != "" {
			return Secret{}, fmt.Errorf("--secret %s: host %q: %s", v, h, problem)
		}
		s.hosts = append(s.hosts, e)
	}
	return s, nil
}

// The parts of a request a secret's `in` may name: where the placeholder
// is replaced by the real value in requests to the secret's hosts.
//
// Stability: policy files name them; a value never changes.
const (
	SecretInHeader = "header" // header values, a Basic credential decoded
	SecretInQuery  = "query"  // the URL's query
	SecretInPath   = "path"   // the URL's path
	SecretInBody   = "body"   // the body, streamed
)

// SecretInParts is every value `in` may hold, in the order messages list
// them.
var SecretInParts = []string{SecretInHeader, SecretInQuery, SecretInPath, SecretInBody}

// DefaultSecretIn is where a secret without `in` is substituted: where
// credentials live. Not the body: an upstream that says back what it is
// sent (a model asked to repeat its prompt, an API that stores and returns
// data) would carry the real value back to the guest in forms no scan of
// the response can all know; a credential in a header or the query is not
// what such an upstream repeats.
var DefaultSecretIn = []string{SecretInHeader, SecretInQuery}

// SubstitutesIn reports whether the placeholder is replaced in part (one
// of SecretIn*) of a request to the secret's hosts.
func (s *Secret) SubstitutesIn(part string) bool {
	in := s.In
	if len(in) == 0 {
		in = DefaultSecretIn
	}
	return slices.Contains(in, part)
}

// Binds reports whether host (a name as the guest resolved it) is one of
// the secret's hosts.
func (s *Secret) Binds(host string) bool { return anyMatches(s.hosts, host) }

// Real is the real value, nil before Bind. Never log or store it.
func (s *Secret) Real() []byte { return s.real }

// InForce is the placeholder the guest holds, "" before Bind.
func (s *Secret) InForce() string { return s.ph }

// where says where a secret was declared, for messages.
func (s *Secret) where() string {
	if s.Line == 0 {
		return "--secret " + s.Name
	}
	return fmt.Sprintf("[[secret]] %s (line %d)", s.Name, s.Line)
}

// String names the secret and its hosts, never its value.
func (s Secret) String() string {
	return s.Name + "@" + strings.Join(s.Hosts, ",")
}

// GoString is String: %#v must not print the value either.
func (s Secret) GoString() string { return "policy.Secret(" + s.String() + ")" }

// Secrets returns the policy's secrets, in file order then flag order.
// Their Real and InForce are set once the policy is Bound.
func (p *Policy) Secrets() []*Secret {
	if !p.usable() {
		return nil
	}
	return p.secrets
}

// SecretValue is what Bind gives a secret: its real value and the
// placeholder the guest holds.
type SecretValue struct {
	Real        []byte
	Placeholder string
}

// Bind returns a copy of p whose secrets hold their values, by name:
// every secret of p must be in vals. The policy stays pure: reading the
// real values (an environment variable, a file) and making placeholders is
// the caller's (mitm.BindSecrets).
func (p *Policy) Bind(vals map[string]SecretValue) (*Policy, error) {
	if !p.usable() || len(p.secrets) == 0 {
		return p, nil
	}
	q := *p
	q.secrets = make([]*Secret, len(p.secrets))
	var errs []error
	seen := map[string]string{}
	for i, s := range p.secrets {
		c := *s
		v, ok := vals[s.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("policy: %s has no value", s.where()))
		case len(v.Real) < MinSecretBytes:
			errs = append(errs, fmt.Errorf("policy: %s: the real value is %d bytes; capsem needs at least %d to tell it from ordinary traffic", s.where(), len(v.Real), MinSecretBytes))
		case len(v.Placeholder) < minPlaceholderBytes:
			errs = append(errs, fmt.Errorf("policy: %s: the placeholder is shorter than %d bytes", s.where(), minPlaceholderBytes))
		case strings.Contains(string(v.Real), v.Placeholder) || strings.Contains(v.Placeholder, string(v.Real)):
			errs = append(errs, fmt.Errorf("policy: %s: the placeholder and the real value contain each other; choose another placeholder", s.where()))
		case seen[v.Placeholder] != "":
			errs = append(errs, fmt.Errorf("policy: %s has the placeholder of %s; give each secret its own", s.where(), seen[v.Placeholder]))
		}
		seen[v.Placeholder] = s.Name
		c.real, c.ph, c.phDNS = v.Real, v.Placeholder, strings.ToLower(v.Placeholder)
		q.secrets[i] = &c
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &q, nil
}

// Placeholders maps each secret's name to the placeholder in force: what
// capsem-net writes to placeholders.json and a reload keeps.
func (p *Policy) Placeholders() map[string]string {
	m := map[string]string{}
	for _, s := range p.Secrets() {
		m[s.Name] = s.ph
	}
	return m
}

// Bound reports whether the policy's secrets hold their values.
func (p *Policy) Bound() bool {
	for _, s := range p.Secrets() {
		if s.real == nil {
			return false
		}
	}
	return true
}

// secretInName returns the name of the secret whose placeholder the
// canonical name holds (names ignore case), or "".
func (p *Policy) secretInName(canon string) string {
	for _, s := range p.secrets {
		if s.phDNS != "" && strings.Contains(canon, s.phDNS) {
			return s.Name
		}
	}
	return ""
}
