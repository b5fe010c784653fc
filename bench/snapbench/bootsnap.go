//go:build linux

package main

import (
	"fmt"
	"time"
)

// bootResult is the boot-snapshot section's figures: each cold (--cold,
// the kernel booted) and from the boot snapshot.
type bootResult struct {
	runCold, runSnap     []time.Duration // capsem run -- true
	startCold, startSnap []time.Duration // a new capsem start + first exec
}

// bootSnapshot alternates cold and snapshot rounds, after one unmeasured
// of each (the first run without --cold may be the one that makes the
// boot snapshot): `capsem run -- true`, then a new sandbox's `capsem
// start` until its first exec, removed after.
func (b *bench) bootSnapshot(rounds int) (r bootResult, err error) {
	run := func(extra ...string) (time.Duration, error) {
		return b.timed(append(append(b.sandboxFlags("run"), extra...), "--", "true")...)
	}
	r.runCold, r.runSnap, err = series(rounds, "capsem run -- true", "cold", "boot snapshot", func(int) (cold, snap time.Duration, err error) {
		if cold, err = run("--cold"); err != nil {
			return
		}
		snap, err = run()
		return
	})
	if err != nil {
		return r, err
	}
	newStart := func(name string, extra ...string) (time.Duration, error) {
		_, ready, err := b.startReady(name, extra...)
		if e := b.rm(name); err == nil {
			err = e
		}
		return ready, err
	}
	r.startCold, r.startSnap, err = series(rounds, "new capsem start + first exec", "cold", "boot snapshot", func(i int) (cold, snap time.Duration, err error) {
		if cold, err = newStart(fmt.Sprintf("cold-%d", i), "--cold"); err != nil {
			return
		}
		snap, err = newStart(fmt.Sprintf("boot-%d", i))
		return
	})
	return r, err
}
