package policy

import (
	"slices"
	"strings"

	"github.com/capsem/capsem/dlp"
)

// The [dlp] actions: what a credential found in a decrypted request does.
const (
	DLPLog   = "log"   // the request goes on; its event says dlp-match (the default)
	DLPBlock = "block" // the request is refused with a 403 naming the detector
	DLPOff   = "off"   // no scan
)

// DLP is [dlp]: the scan of every decrypted request for credentials.
type DLP struct {
	// Action is DLPLog, DLPBlock or DLPOff; DLPLog when [dlp] does not say.
	Action string
	// Detectors are the dlp detectors to run; nil means all of them.
	Detectors []string
	// AllowHosts are names and "*.name" patterns whose requests are not
	// scanned, as written.
	AllowHosts []string
	// Expected are, by detector, the hosts where its credential is
	// expected (a provider's key at the provider's API host): package
	// dlp's (dlp.ExpectedHosts) unless default_expected_hosts = false,
	// the list of each detector expected_hosts names in place of dlp's.
	// A detector with no hosts is not a key. Read only.
	Expected map[string][]string

	allow    []entry
	expected map[string][]entry
}

// DLP returns the [dlp] settings in force.
func (p *Policy) DLP() DLP {
	if !p.usable() || p.dlp.Action == "" {
		return DLP{Action: DLPLog, Expected: defaultExpected.text, expected: defaultExpected.entries}
	}
	return p.dlp
}

// Exempt reports whether requests to host are not scanned: an allow_hosts
// entry matches it.
func (d DLP) Exempt(host string) bool { return anyMatches(d.allow, host) }

// ExpectedAt returns the detectors whose credential is expected at host,
// in the order of dlp.Detectors (nil when none is): a match of theirs in
// a request to host is where the credential belongs, not a finding.
func (d DLP) ExpectedAt(host string) []string {
	var out []string
	for _, name := range dlp.Detectors() {
		if es := d.expected[name]; len(es) > 0 && anyMatches(es, host) {
			out = append(out, name)
		}
	}
	return out
}

// expectedHosts are the hosts of some detectors, as written and parsed.
type expectedHosts struct {
	text    map[string][]string
	entries map[string][]entry
}

func (x *expectedHosts) set(detector string, text []string, entries []entry) {
	if len(text) == 0 {
		delete(x.text, detector)
		delete(x.entries, detector)
		return
	}
	x.text[detector], x.entries[detector] = text, entries
}

// defaultExpected is package dlp's expected hosts, parsed once. Its
// entries are checked by TestDLPExpectedDefaults: one that did not parse
// would be left out, never panic.
var defaultExpected = func() expectedHosts {
	x := expectedHosts{text: map[string][]string{}, entries: map[string][]entry{}}
	for _, d := range dlp.Detectors() {
		var text []string
		var entries []entry
		for _, h := range dlp.ExpectedHosts(d) {
			if e, problem := parseHostOnly(h, ""); problem == "" {
				text, entries = append(text, h), append(entries, e)
			}
		}
		x.set(d, text, entries)
	}
	return x
}()

// dlpTable builds [dlp].
func (b *builder) dlpTable(t *table) {
	d := DLP{Action: DLPLog}
	seen := map[string]leaf{}
	known := dlp.Detectors()
	// The detectors expected_hosts names, with their hosts.
	type override struct {
		text    []string
		entries []entry
	}
	over := map[string]*override{}
	badName := map[string]bool{} // reported once
	for k, l := range b.w.values(t) {
		switch k.name {
		case "action":
			switch l.value {
			case DLPLog, DLPBlock, DLPOff:
				d.Action = l.value
			default:
				b.c.add(l.line, "dlp action %q: write \"log\" (record a match, let the request go), \"block\" (refuse it with a 403) or \"off\"", l.value)
			}
		case "detectors":
			switch {
			case !slices.Contains(known, l.value):
				b.c.add(l.line, "dlp detector %q: capsem has no such detector; the detectors are %s", l.value, strings.Join(known, ", "))
			case seen[l.value].line > 0:
				b.c.add(l.line, "dlp detector %q repeats line %d; remove one of them", l.value, seen[l.value].line)
			default:
				seen[l.value] = *l
				d.Detectors = append(d.Detectors, l.value)
			}
		case "allow_hosts":
			e, problem := parseHostOnly(l.value, "requests to the name are not scanned on any port")
			if problem != "" {
				b.c.add(l.line, "dlp allow_hosts entry %q: %s", l.value, problem)
				continue
			}
			d.AllowHosts = append(d.AllowHosts, l.value)
			d.allow = append(d.allow, e)
		case "expected_hosts":
			name := l.path[len(l.path)-1]
			if !slices.Contains(known, name) {
				if !badName[name] {
					badName[name] = true
					b.c.add(l.keyLine, "dlp expected_hosts names %q: capsem has no such detector; the detectors are %s", name, strings.Join(known, ", "))
				}
				continue
			}
			e, problem := parseHostOnly(l.value, "the credential is expected at the name on any port")
			if problem != "" {
				b.c.add(l.line, "dlp expected_hosts entry %q of %s: %s", l.value, name, problem)
				continue
			}
			o := over[name]
			if o == nil {
				o = &override{}
				over[name] = o
			}
			o.text, o.entries = append(o.text, l.value), append(o.entries, e)
		}
	}
	x := expectedHosts{text: map[string][]string{}, entries: map[string][]entry{}}
	if on, written := b.cfg.boolAt(t, "default_expected_hosts"); !written || on {
		for name, text := range defaultExpected.text {
			x.set(name, text, defaultExpected.entries[name])
		}
	}
	if v, written := b.cfg.value(t, "expected_hosts"); written && !v.IsNil() {
		// The detectors written, also those with an empty list (which
		// hold no string for the walker to see): an empty list is no
		// host at all.
		names := make([]string, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			names = append(names, it.Key().String())
		}
		slices.Sort(names)
		for _, name := range names {
			switch {
			case slices.Contains(known, name):
				o := over[name]
				if o == nil {
					o = &override{}
				}
				x.set(name, o.text, o.entries)
			case !badName[name]:
				badName[name] = true
				b.c.add(b.w.keyLine([]string{t.name, "expected_hosts", name}), "dlp expected_hosts names %q: capsem has no such detector; the detectors are %s", name, strings.Join(known, ", "))
			}
		}
	}
	d.Expected, d.expected = x.text, x.entries
	if v, written := b.cfg.value(t, "detectors"); written && !v.IsNil() && v.Len() == 0 && d.Action != DLPOff {
		// detectors = [] scans for nothing: say so rather than log or
		// block nothing in silence.
		b.c.add(b.w.keyLine([]string{t.name, "detectors"}), "dlp detectors = []: an empty list scans for nothing; list detectors, remove the key (all of them), or set action = \"off\"")
	}
	b.p.dlp = d
}
