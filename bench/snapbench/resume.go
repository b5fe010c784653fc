//go:build linux

package main

import "time"

// resumeResult is the resume section's figures.
type resumeResult struct {
	start, ready []time.Duration // capsem start; start + first exec
}

// resume suspends name (running, its marker written) and resumes it
// rounds times, after one unmeasured round: `capsem start NAME` of the
// suspended sandbox, then `capsem exec NAME -- true`. It leaves name
// running.
func (b *bench) resume(name string, rounds int) (r resumeResult, err error) {
	r.start, r.ready, err = series(rounds, "resume", "start", "+ first exec", func(int) (start, ready time.Duration, err error) {
		if err = b.suspend(name); err != nil {
			return
		}
		if err = b.wantState(name, "suspended"); err != nil {
			return
		}
		if start, ready, err = b.startReady(name); err != nil {
			return
		}
		return start, ready, b.checkMarker(name)
	})
	return r, err
}
