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
		args := append([]string{"run", "--data", b.data, "--ca-dir", b.ca, "--workspace", b.ws}, extra...)
		return b.timed(append(args, "--", "true")...)
	}
	for i := range rounds + 1 {
		cold, err := run("--cold")
		if err != nil {
			return r, err
		}
		snap, err := run()
		if err != nil {
			return r, err
		}
		if i == 0 {
			progress("capsem run -- true, warm-up: cold %s, boot snapshot %s", msf(cold), msf(snap))
			continue
		}
		r.runCold, r.runSnap = append(r.runCold, cold), append(r.runSnap, snap)
		progress("capsem run -- true %d: cold %s, boot snapshot %s", i, msf(cold), msf(snap))
	}
	newStart := func(name string, extra ...string) (time.Duration, error) {
		_, ready, err := b.startReady(name, extra...)
		if e := b.rm(name); err == nil {
			err = e
		}
		return ready, err
	}
	for i := range rounds + 1 {
		cold, err := newStart(fmt.Sprintf("cold-%d", i), "--cold")
		if err != nil {
			return r, err
		}
		snap, err := newStart(fmt.Sprintf("boot-%d", i))
		if err != nil {
			return r, err
		}
		if i == 0 {
			progress("new capsem start + first exec, warm-up: cold %s, boot snapshot %s", msf(cold), msf(snap))
			continue
		}
		r.startCold, r.startSnap = append(r.startCold, cold), append(r.startSnap, snap)
		progress("new capsem start + first exec %d: cold %s, boot snapshot %s", i, msf(cold), msf(snap))
	}
	return r, nil
}
