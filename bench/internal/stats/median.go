// Package stats holds the arithmetic the benchmarks share, so that a figure
// in docs/BENCHMARKS.md means the same whichever bench printed it. It never
// changes its argument.
package stats

import "slices"

// Number is what Median takes: counts, byte sizes, rates, durations.
type Number interface {
	~int | ~int64 | ~float64
}

// Median is the middle value of v, the mean of the two middle values when
// there are as many on each side; 0 for none. v is not reordered.
func Median[T Number](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
