package policy

// dns builds [dns].
func (b *builder) dns(t *table) {
	if n, ok := b.limit(t, "max_wildcard_names", MaxMaxWildcardNames, "dns.max_wildcard_names = %d: write a number of names from 1 to %d, or 0 for the default (%d)", MaxMaxWildcardNames, DefaultMaxWildcardNames); ok {
		b.p.maxWildcardNames = n
	}
}
