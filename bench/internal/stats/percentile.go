package stats

import "slices"

// Percentile is the p-th percentile of v by nearest rank (p in 1..100: the
// smallest value with at least p % of the values at or below it); 0 for
// none. v is not reordered.
func Percentile[T Number](v []T, p int) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}
