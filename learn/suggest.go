package learn

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/capsem/capsem/policy"
)

// Options shape a suggestion.
type Options struct {
	// Base is the policy file's text the suggestion keeps the rest of:
	// its [upstream], [mcp.servers.NAME], [[forward]], [dlp] and other
	// tables, as written; its [[secret]] tables with their hosts cut to
	// those reached; its [network] unknown and ask_timeout. "": none.
	Base string
	// BaseName names Base in errors and the header.
	BaseName string
	// FromDenied adds what the sessions were refused, each line marked.
	FromDenied bool
	// Siblings is how many names under one parent make a "*.parent"
	// entry. Zero means DefaultSiblings.
	Siblings int
}

// DefaultSiblings is how many names used under one parent are written as
// one wildcard: two could be chance (www and api), three is a pattern
// (a CDN's shards, a registry's mirrors).
const DefaultSiblings = 3

// wideHTTP is how many path prefixes, or methods, a host's requests may
// spread over for Suggest to write [[http]] rules for it: past these the
// rules would say little more than [network] does.
const (
	wideHTTPPrefixes = 6
	wideHTTPMethods  = 3
)

// Suggestion is Suggest's result.
type Suggestion struct {
	Text []byte // the policy file
	// Remaining are the decisions the suggestion still makes otherwise
	// (Check of the sessions against it): none when everything the
	// sessions decided is reproduced.
	Remaining []Change
}

// use is what the sessions did with one name.
type use struct {
	dns      int64            // allowed DNS answers
	ports    map[uint16]int64 // allowed flows by port
	requests int64            // allowed requests
}

// Suggest writes the smallest policy under which rec's allowed traffic is
// still allowed and its refused traffic still refused.
func Suggest(rec *Record, o Options) (Suggestion, error) {
	if o.Siblings == 0 {
		o.Siblings = DefaultSiblings
	}
	var rest *policy.Policy // the base's tables other than those learned
	var base *policy.Policy
	restText := ""
	if o.Base != "" {
		var err error
		if base, err = policy.Parse(o.BaseName, []byte(o.Base)); err != nil {
			return Suggestion{}, fmt.Errorf("learn: --base: %w", err)
		}
		restText = baseTables(o.Base)
		if rest, err = policy.Parse(o.BaseName+" (without [network], [[http]], [mcp] and [[secret]])", []byte(restText)); err != nil {
			return Suggestion{}, fmt.Errorf("learn: --base: its tables other than [network], [[http]], [mcp] and [[secret]] do not stand alone: %w", err)
		}
	}
	seen := rec.Seen()
	var w writer
	w.line("# capsem policy suggest: the smallest policy under which the allowed traffic of")
	what := "session"
	if len(rec.Sessions) > 1 {
		what = "sessions"
	}
	w.line("# %s %s (%d events) is still allowed, and what it was refused still refused.", what, strings.Join(rec.Sessions, ", "), rec.Events)
	w.line("# Each line says how many events it covers. Read it before you use it.")
	if o.Base != "" {
		w.line("# The tables other than [network], [[http]], [mcp] and [[secret]] are %s's, as it writes them.", o.BaseName)
	}
	w.line("")

	names, denied := networkUse(seen, rest)
	entries := networkEntries(names, denied, o.Siblings)
	w.line("[network]")
	w.line("allow = [")
	for _, e := range entries {
		w.line("  %s, # %s", quote(e.text), e.note)
	}
	if o.FromDenied {
		for _, s := range seen {
			if s.Allowed || s.Kind != KindDNS && s.Kind != KindFlow || rest.DecideName(s.Name).Allowed {
				continue
			}
			text := s.Name
			if s.Kind == KindFlow && s.Port != policy.DefaultPort {
				text += ":" + strconv.Itoa(int(s.Port))
			}
			if covered(entries, text) {
				continue
			}
			entries = append(entries, entry{text: text})
			w.line("  %s, # DENIED in the session: %s (%s)", quote(text), events(s.Events), s.Reason)
		}
	}
	w.line("]")
	if base.AskNetwork() {
		w.line("unknown = \"ask\"")
	}
	if o.Base != "" && base.NetworkAskTimeout() != policy.DefaultAskTimeout {
		w.line("ask_timeout = %d", int(base.NetworkAskTimeout().Seconds()))
	}
	if _, served := names[policy.MCPGatewayHost]; served {
		w.line("# %s was served by the session policy's [mcp.servers]: give --base POLICY to keep them", policy.MCPGatewayHost)
	}

	secretTables(&w, base, names)
	httpRules(&w, seen)
	mcpRules(&w, seen, base, o.Base != "", entries)
	if restText != "" {
		w.line("")
		w.line("# --- from %s ---", o.BaseName)
		w.line("%s", restText)
	}

	text := []byte(w.String())
	p, err := policy.Parse("the suggestion", text)
	if err != nil {
		return Suggestion{Text: text}, fmt.Errorf("learn: the suggestion does not parse (please report this): %w", err)
	}
	return Suggestion{Text: text, Remaining: Check(p, rec)}, nil
}

// networkUse is what the sessions did with each name the policy allowed
// them, and every name they were refused, leaving out what rest (the
// base's other tables: [[forward]], [mcp.servers]) allows by itself.
func networkUse(seen []Seen, rest *policy.Policy) (map[string]*use, []string) {
	names := map[string]*use{}
	var denied []string
	for _, s := range seen {
		if s.Kind == KindMCP {
			continue
		}
		if !s.Allowed {
			if s.Kind != KindRequest {
				denied = append(denied, s.Name)
			}
			continue
		}
		if restAllows(rest, s) {
			continue
		}
		u := names[s.Name]
		if u == nil {
			u = &use{ports: map[uint16]int64{}}
			names[s.Name] = u
		}
		switch s.Kind {
		case KindDNS:
			u.dns += s.Events
		case KindFlow:
			u.ports[s.Port] += s.Events
		case KindRequest:
			u.requests += s.Events
		}
	}
	return names, denied
}

// restAllows reports whether the base's other tables allow s by
// themselves: a [[forward]] name, the MCP gateway's.
func restAllows(rest *policy.Policy, s Seen) bool {
	if rest == nil {
		return false
	}
	switch s.Kind {
	case KindFlow:
		return rest.DecideFlow(s.Name, s.Port).Allowed
	case KindRequest:
		return rest.DecideFlow(s.Name, policy.DefaultPort).Allowed
	}
	return rest.DecideName(s.Name).Allowed
}

// entry is one [network] allow entry and what it covers.
type entry struct {
	text, note string
}

func covered(es []entry, text string) bool {
	return slices.ContainsFunc(es, func(e entry) bool { return e.text == text })
}

// networkEntries are the allow entries of names: one per name and port
// (443 without ":port"), names under one parent with the same ports
// collapsed to "*.parent" when o.Siblings of them were used and none
// refused falls under it.
func networkEntries(names map[string]*use, denied []string, siblings int) []entry {
	portsOf := func(u *use) []uint16 {
		ps := slices.Sorted(maps.Keys(u.ports))
		if len(ps) == 0 {
			ps = []uint16{policy.DefaultPort} // resolved, or requests only: an allow entry's port
		}
		return ps
	}
	// Group by parent and port set.
	type group struct {
		parent string
		ports  string
	}
	groups := map[group][]string{}
	for name, u := range names {
		i := strings.IndexByte(name, '.')
		if i < 0 || !strings.Contains(name[i+1:], ".") {
			continue // no wildcard over a top-level domain
		}
		g := group{name[i+1:], fmt.Sprint(portsOf(u))}
		groups[g] = append(groups[g], name)
	}
	collapsed := map[string]string{} // name → its wildcard
	var out []entry
	for _, g := range slices.SortedFunc(maps.Keys(groups), func(a, b group) int { return cmp.Or(cmp.Compare(a.parent, b.parent), cmp.Compare(a.ports, b.ports)) }) {
		members := groups[g]
		if len(members) < siblings || slices.ContainsFunc(denied, func(d string) bool { return strings.HasSuffix(d, "."+g.parent) }) {
			continue
		}
		slices.Sort(members)
		var total int64
		for _, m := range members {
			collapsed[m] = "*." + g.parent
			total += sum(names[m])
		}
		for _, p := range portsOf(names[members[0]]) {
			out = append(out, entry{text: withPort("*."+g.parent, p),
				note: fmt.Sprintf("%s; %d names under %s were used (%s): %d siblings make a wildcard", events(total), len(members), g.parent, strings.Join(members, ", "), siblings)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if collapsed[name] != "" || policy.CheckEntry(name) != nil || name == policy.MCPGatewayHost {
			// No entry can name it (a session's policy never allowed it),
			// or capsem serves it: an entry would send it upstream.
			continue
		}
		u := names[name]
		for _, p := range portsOf(u) {
			note := fmt.Sprintf("%s, %s", events(u.ports[p]+u.requests), plural(u.dns, "DNS answer"))
			if len(u.ports) == 0 && u.requests == 0 {
				note = fmt.Sprintf("%s; resolved, never connected to", plural(u.dns, "DNS answer"))
			}
			out = append(out, entry{text: withPort(name, p), note: note})
		}
	}
	return out
}

func sum(u *use) int64 {
	n := u.dns + u.requests
	for _, v := range u.ports {
		n += v
	}
	return n
}

func withPort(name string, port uint16) string {
	if port == policy.DefaultPort {
		return name
	}
	return name + ":" + strconv.Itoa(int(port))
}

func events(n int64) string { return plural(n, "event") }

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatInt(n, 10) + " " + what + "s"
}

// writer builds the file.
type writer struct{ strings.Builder }

func (w *writer) line(format string, args ...any) {
	fmt.Fprintf(w, format, args...)
	w.WriteByte('\n')
}
