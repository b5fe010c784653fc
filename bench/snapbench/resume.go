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
	for i := range rounds + 1 {
		if err = b.suspend(name); err != nil {
			return
		}
		if err = b.wantState(name, "suspended"); err != nil {
			return
		}
		start, ready, e := b.startReady(name)
		if e != nil {
			return r, e
		}
		if err = b.checkMarker(name); err != nil {
			return
		}
		if i == 0 {
			progress("resume, warm-up: start %s, + first exec %s", msf(start), msf(ready))
			continue
		}
		r.start, r.ready = append(r.start, start), append(r.ready, ready)
		progress("resume %d: start %s, + first exec %s", i, msf(start), msf(ready))
	}
	return
}
