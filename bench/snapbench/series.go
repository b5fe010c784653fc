//go:build linux

package main

import "time"

// series runs round rounds+1 times and keeps the two durations of each
// but the first, an unmeasured warm-up; what names the series and aName,
// bName the two figures in the progress lines. The first error ends it.
func series(rounds int, what, aName, bName string, round func(i int) (a, b time.Duration, err error)) (as, bs []time.Duration, err error) {
	for i := range rounds + 1 {
		a, b, err := round(i)
		if err != nil {
			return as, bs, err
		}
		if i == 0 {
			progress("%s, warm-up: %s %s, %s %s", what, aName, msf(a), bName, msf(b))
			continue
		}
		as, bs = append(as, a), append(bs, b)
		progress("%s %d: %s %s, %s %s", what, i, aName, msf(a), bName, msf(b))
	}
	return as, bs, nil
}
