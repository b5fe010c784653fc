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

	allow []entry
}

// DLP returns the [dlp] settings in force.
func (p *Policy) DLP() DLP {
	if !p.usable() || p.dlp.Action == "" {
		return DLP{Action: DLPLog}
	}
	return p.dlp
}

// Exempt reports whether requests to host are not scanned: an allow_hosts
// entry matches it.
func (d DLP) Exempt(host string) bool { return anyMatches(d.allow, host) }

// dlpTable builds [dlp].
func (b *builder) dlpTable(t *table) {
	d := DLP{Action: DLPLog}
	seen := map[string]leaf{}
	known := dlp.Detectors()
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
		}
	}
	if v, written := b.cfg.value(t, "detectors"); written && !v.IsNil() && v.Len() == 0 && d.Action != DLPOff {
		// detectors = [] scans for nothing: say so rather than log or
		// block nothing in silence.
		b.c.add(b.w.keyLine([]string{t.name, "detectors"}), "dlp detectors = []: an empty list scans for nothing; list detectors, remove the key (all of them), or set action = \"off\"")
	}
	b.p.dlp = d
}
