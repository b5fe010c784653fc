package main

import (
	"time"

	"github.com/capsem/capsem/bench/internal/cpu"
)

// waitQuiet waits (up to 15 s) until the machine is idle — below a
// tenth of its capacity for half a second: the figures are latencies of a
// few hundred microseconds on two cores, and anything else running shows
// up in their tails. The wait is short because this machine is shared with
// other sessions' test runs that can keep it busy for minutes: a path that
// could not wait for quiet is measured anyway, and the report says how busy
// the machine was. It records the most background load it started with.
func waitQuiet() {
	var load float64
	for deadline := time.Now().Add(15 * time.Second); ; {
		j0 := cpu.Machine()
		time.Sleep(500 * time.Millisecond)
		j1 := cpu.Machine()
		if j1.Total > j0.Total {
			load = (j1.Busy - j0.Busy) / (j1.Total - j0.Total)
		}
		if load < 0.1 || time.Now().After(deadline) {
			break
		}
	}
	maxBackground = max(maxBackground, load)
}

// maxBackground is the most background load (a fraction of the machine) a
// measurement started with.
var maxBackground float64
