package learn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capsem/capsem/policy"
)

// secretTables writes the base's [[secret]] tables with their hosts cut to
// those the sessions reached: a secret's real value goes to no host the
// work did not need. A secret none of whose hosts was reached keeps them
// all, and says so: the suggestion does not decide that an agent can do
// without a credential it holds.
func secretTables(w *writer, base *policy.Policy, names map[string]*use) {
	for _, s := range base.Secrets() {
		if s.Line == 0 {
			continue // a --secret flag: not the file's to write
		}
		var reached []string
		var n int64
		for _, h := range s.Hosts {
			for name, u := range names {
				if hostCovers(h, name) {
					if !slices.Contains(reached, h) {
						reached = append(reached, h)
					}
					n += sum(u)
				}
			}
		}
		hosts, note := reached, fmt.Sprintf("its hosts reached: %s (%s)", strings.Join(reached, ", "), events(n))
		if len(reached) == 0 {
			hosts, note = s.Hosts, "none of its hosts was reached in the sessions: all kept"
		}
		w.line("\n[[secret]] # %s", note)
		w.line("name = %s", quote(s.Name))
		if s.FromEnv != "" {
			w.line("from_env = %s", quote(s.FromEnv))
		}
		if s.FromFile != "" {
			w.line("from_file = %s", quote(s.FromFile))
		}
		w.line("hosts = [%s]", quoteAll(hosts))
		if s.Placeholder != "" {
			w.line("placeholder = %s", quote(s.Placeholder))
		}
		if len(s.In) > 0 {
			w.line("in = [%s]", quoteAll(s.In))
		}
	}
}

// hostCovers reports whether a host pattern as a secret writes it ("x",
// "*.x") covers the canonical name.
func hostCovers(pattern, name string) bool {
	p, ok := policy.Canonical(strings.TrimPrefix(pattern, "*."))
	if !ok {
		return false
	}
	if strings.HasPrefix(pattern, "*.") {
		return strings.HasSuffix(name, "."+p)
	}
	return name == p
}
