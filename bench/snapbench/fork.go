//go:build linux

package main

import (
	"fmt"
	"sync"
	"time"
)

// forkResult is the fork section's figures.
type forkResult struct {
	start, ready []time.Duration // one fork at a time: capsem start --from; + first exec
	// The eight started at once: the wall time until the last answered,
	// and each one's start and start + exec (zero where it failed).
	eightWall              time.Duration
	eightStart, eightReady []time.Duration
	eightAnswered          int
	eightErr               error
}

// parallelForks is how many forks of one snapshot start at once.
const parallelForks = 8

// forks starts rounds forks of from (SANDBOX@TAG) one at a time, after
// one unmeasured, each timed to its first exec, checked to hold the
// source's memory and removed before the next; then eight at once.
func (b *bench) forks(from string, rounds int) (r forkResult, err error) {
	r.start, r.ready, err = series(rounds, "fork", "start", "+ first exec", func(i int) (start, ready time.Duration, err error) {
		name := fmt.Sprintf("fork-%d", i)
		start, ready, err = b.startReady(name, "--from", from)
		if err == nil {
			err = b.checkMarker(name)
		}
		if e := b.rm(name); err == nil {
			err = e
		}
		return start, ready, err
	})
	if err != nil {
		return r, err
	}

	r.eightStart = make([]time.Duration, parallelForks)
	r.eightReady = make([]time.Duration, parallelForks)
	errs := make([]error, parallelForks)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range parallelForks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.eightStart[i], r.eightReady[i], errs[i] = b.startReady(fmt.Sprintf("par-%d", i), "--from", from)
		}()
	}
	wg.Wait()
	r.eightWall = time.Since(t0)
	for i, e := range errs {
		name := fmt.Sprintf("par-%d", i)
		if e == nil {
			e = b.checkMarker(name)
		}
		if e == nil {
			r.eightAnswered++
		} else {
			r.eightStart[i], r.eightReady[i] = 0, 0
			if r.eightErr == nil {
				r.eightErr = e
			}
			progress("eight at once: %s: %v", name, e)
		}
	}
	progress("eight forks at once: %d of %d answered, wall %s", r.eightAnswered, parallelForks, msf(r.eightWall))
	for i := range parallelForks {
		if e := b.rm(fmt.Sprintf("par-%d", i)); e != nil && err == nil {
			err = e
		}
	}
	return r, err
}
