//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/capsem/capsem/bench/internal/stats"
)

// The targets of issue 29.
const (
	targetResume  = 400 * time.Millisecond // resume: capsem start's p50
	targetFork    = 600 * time.Millisecond // fork: capsem start --from returned (exec-ready), p50
	targetPause   = time.Second            // the touched guest's pause
	targetBytes   = 600 << 20              // the touched snapshot's files
	targetBootSnp = 0.4                    // boot snapshot / cold, p50s
)

// report prints the run's figures as a markdown block for
// docs/BENCHMARKS.md, the command that made them first.
func report(r *results) {
	cmd := "go tool task bench:snapshot"
	if len(os.Args) > 1 {
		cmd += " -- " + strings.Join(os.Args[1:], " ")
	}
	machine := "TCG unless /dev/kvm is usable"
	if r.idle.Machine != "" {
		machine = r.idle.Machine
	}
	fmt.Printf("```sh\n%s      # = go run ./bench/snapbench (root; the guest image built first)\n```\n\n", cmd)
	fmt.Printf("Measured %s at %s, one run, everything side by side in it (one unmeasured round of each series first): guest image %s, %s, %d host CPUs.\n\n",
		time.Now().UTC().Format("2006-01-02"), commit(), r.image, machine, runtime.NumCPU())

	fmt.Printf("| | p50 | min | max | runs |\n|---|---|---|---|---|\n")
	row := func(what string, d []time.Duration, err error) {
		switch {
		case len(d) > 0:
			fmt.Printf("| %s | %s | %s | %s | %d |\n", what, msf(p50(d)), msf(slices.Min(d)), msf(slices.Max(d)), len(d))
		case err != nil:
			fmt.Printf("| %s | failed: %s | | | 0 |\n", what, firstLine(err))
		}
	}
	row("resume: `capsem start NAME` of a suspended sandbox", r.resume.start, r.resumeErr)
	row("resume: that start + the first `capsem exec NAME -- true`", r.resume.ready, r.resumeErr)
	row("fork: `capsem start --from SRC@TAG NEW`", r.fork.start, r.forkErr)
	row("fork: that start + the first `capsem exec NEW -- true`", r.fork.ready, r.forkErr)
	row("`capsem run --cold -- true` (the kernel booted)", r.boot.runCold, r.bootErr)
	row("`capsem run -- true` (the boot snapshot)", r.boot.runSnap, r.bootErr)
	row("a new `capsem start --cold NAME` + first exec", r.boot.startCold, r.bootErr)
	row("a new `capsem start NAME` (the boot snapshot) + first exec", r.boot.startSnap, r.bootErr)

	f := r.fork
	if len(f.eightReady) > 0 {
		fmt.Printf("\n%d forks of %s@%s started at once (`capsem start --from`, then one `capsem exec -- true` each): %d of %d answered, %s from the first start to the last exec's exit.\n\n",
			parallelForks, srcName, readyTag, f.eightAnswered, parallelForks, msf(f.eightWall))
		fmt.Printf("| fork | start | + first exec |\n|---|---|---|\n")
		for i := range f.eightReady {
			if f.eightReady[i] == 0 {
				fmt.Printf("| par-%d | failed | |\n", i)
				continue
			}
			fmt.Printf("| par-%d | %s | %s |\n", i, msf(f.eightStart[i]), msf(f.eightReady[i]))
		}
	}

	t := r.touched
	if t.snap.Tag != "" {
		fmt.Printf("\nA guest that touched %d MiB: `head -c %d /dev/urandom` to a file in its /dev/shm (%s, in the guest's RAM; %s in the guest), then `capsem snapshot`; the pause and the bytes are the snapshot's record (`capsem snapshots --json`):\n\n",
			t.mib, int64(t.mib)<<20, t.shmFS, msf(t.fill))
		fmt.Printf("| snapshot | guest paused | files on disk | `capsem snapshot`, exec to exit |\n|---|---|---|---|\n")
		if r.idle.Tag != "" {
			fmt.Printf("| %s@%s, the idle guest (the forks') | %.1f ms | %.1f MiB | |\n", srcName, r.idle.Tag, r.idle.PausedMS, mibf(r.idle.Bytes))
		}
		fmt.Printf("| %s@%s, after %d MiB of random bytes in /dev/shm | %.1f ms | %.1f MiB | %s |\n", srcName, t.snap.Tag, t.mib, t.snap.PausedMS, mibf(t.snap.Bytes), msf(t.wall))
	}

	fmt.Printf("\n| target | measured | |\n|---|---|---|\n")
	target := func(what, measured string, ok bool) {
		fmt.Printf("| %s | %s | %s |\n", what, measured, passFail(ok))
	}
	failed := func(what string, err error) { fmt.Printf("| %s | failed: %s | fail |\n", what, firstLine(err)) }
	if d := r.resume.start; len(d) > 0 {
		target("resume: `capsem start` p50 ≤ 400 ms", msf(p50(d)), p50(d) <= targetResume)
	} else {
		failed("resume: `capsem start` p50 ≤ 400 ms", r.resumeErr)
	}
	// Exec-ready is what resume's target counts too: `capsem start`
	// returns once the agent answers; the first exec is in the table.
	if d := f.start; len(d) > 0 {
		target("fork to exec-ready (`capsem start --from` returned) p50 ≤ 600 ms", msf(p50(d)), p50(d) <= targetFork)
	} else {
		failed("fork to exec-ready (`capsem start --from` returned) p50 ≤ 600 ms", r.forkErr)
	}
	if len(f.eightReady) > 0 {
		target(fmt.Sprintf("%d forks at once all answer an exec", parallelForks), fmt.Sprintf("%d of %d in %s", f.eightAnswered, parallelForks, msf(f.eightWall)), f.eightAnswered == parallelForks)
	} else {
		failed(fmt.Sprintf("%d forks at once all answer an exec", parallelForks), r.forkErr)
	}
	if t.snap.Tag != "" {
		target(fmt.Sprintf("snapshot of a guest that touched %d MiB: pause ≤ 1 s", t.mib), fmt.Sprintf("%.0f ms", t.snap.PausedMS), t.snap.PausedMS <= float64(targetPause.Milliseconds()))
		target("…its files ≤ 600 MiB", fmt.Sprintf("%.1f MiB", mibf(t.snap.Bytes)), t.snap.Bytes <= targetBytes)
	} else {
		failed(fmt.Sprintf("snapshot of a guest that touched %d MiB: pause ≤ 1 s, files ≤ 600 MiB", *flagTouchMiB), r.touchErr)
	}
	ratio := func(what string, snap, cold []time.Duration) {
		if len(snap) == 0 || len(cold) == 0 {
			failed(what, r.bootErr)
			return
		}
		x := float64(p50(snap)) / float64(p50(cold))
		target(what, fmt.Sprintf("%.2f× (%s vs %s)", x, msf(p50(snap)), msf(p50(cold))), x <= targetBootSnp)
	}
	ratio("`capsem run -- true`: boot snapshot / cold p50 ≤ 0.4×", r.boot.runSnap, r.boot.runCold)
	ratio("new `capsem start` to exec-ready: boot snapshot / cold p50 ≤ 0.4×", r.boot.startSnap, r.boot.startCold)
}

// commit names the checkout the bench ran from, "+changes" when it has
// uncommitted ones.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "an unknown commit"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+changes"
	}
	return c
}

func p50(d []time.Duration) time.Duration { return stats.Percentile(d, 50) }

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "**fail**"
}

func firstLine(err error) string {
	if err == nil {
		return "not run"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return strings.ReplaceAll(s, "|", `\|`)
}

func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func mibf(n int64) float64 { return float64(n) / (1 << 20) }
