package policy

// Limits of [dns] max_wildcard_names.
//
// Every distinct name a wildcard entry allows takes a fake-DNS address and,
// when the guest connects to it, a host lookup of exactly that name: a
// guest can make up names under "*.x" without end (about 66,000 of them used
// up the whole 198.19.0.0/16 pool) and have each label reach x's real name
// servers. The cap bounds both per session. A package install or a git
// clone touches a handful of distinct hosts under a CDN's wildcard; 4,096
// leaves room for far busier sessions while keeping the table small:
// measured, 4,096 names of 40 bytes cost the fake-DNS table 1.2 MiB (the
// largest value, 262,144 names recycled through the pool, 38 MiB), and a
// burst of 70,000 made-up names reaches the default cap within 3 s.
const (
	DefaultMaxWildcardNames = 4096    // when the file does not set max_wildcard_names, or sets 0
	MaxMaxWildcardNames     = 1 << 18 // the largest value accepted (262,144)
)

// MaxWildcardNames is [dns] max_wildcard_names: how many distinct names
// that only a wildcard entry ("*.x") allows fake DNS answers with an address
// in one session. Names beyond it are answered like denied names. 0 in the
// file, or no key, means DefaultMaxWildcardNames; the most is
// MaxMaxWildcardNames.
func (p *Policy) MaxWildcardNames() int {
	if !p.usable() || p.maxWildcardNames == 0 {
		return DefaultMaxWildcardNames
	}
	return p.maxWildcardNames
}
