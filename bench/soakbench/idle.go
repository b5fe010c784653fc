package main

import (
	"fmt"
	"io"
	"os"
	"time"

	benchstats "github.com/capsem/capsem/bench/internal/stats"
)

// idleResult is the idle and flows measurements of one peer.
type idleResult struct {
	peer                          string
	idle, flows, afterFlow, again sample
	err                           error
}

func measureIdleReps(p peer) idleResult {
	var reps []idleResult
	for i := 1; i <= *flagReps; i++ {
		fmt.Fprintf(os.Stderr, "soakbench: %s idle/flows, repetition %d of %d\n", p.name, i, *flagReps)
		r := measureIdle(p, i)
		if r.err != nil {
			return r
		}
		reps = append(reps, r)
	}
	r := idleResult{peer: p.name}
	pick := func(get func(idleResult) sample) sample {
		var ss []sample
		for _, x := range reps {
			ss = append(ss, get(x))
		}
		return medianSample(ss)
	}
	r.idle = pick(func(x idleResult) sample { return x.idle })
	r.flows = pick(func(x idleResult) sample { return x.flows })
	r.afterFlow = pick(func(x idleResult) sample { return x.afterFlow })
	r.again = pick(func(x idleResult) sample { return x.again })
	return r
}

func measureIdle(p peer, rep int) (r idleResult) {
	r.peer = p.name
	e, err := startEnv(p)
	if err != nil {
		r.err = err
		return
	}
	defer e.stop()
	time.Sleep(*flagIdle)
	if r.idle, err = e.sample(); err != nil {
		r.err = err
		return
	}
	e.heapProfile(fmt.Sprintf("heap-idle-%d.pprof", rep))
	fmt.Fprintf(os.Stderr, "  idle: %s\n", r.idle)
	if skip("flows") {
		return
	}
	h, err := e.hold(*flagFlows)
	if err != nil {
		r.err = fmt.Errorf("%s: %d flows: %w", p.name, *flagFlows, err)
		return
	}
	r.flows, err = e.sampleHeld(h, fmt.Sprintf("heap-flows-%d.pprof", rep))
	if err != nil {
		r.err = err
		return
	}
	fmt.Fprintf(os.Stderr, "  %d flows: %s\n", *flagFlows, r.flows)
	if !e.waitHeld(0, time.Minute) {
		r.err = fmt.Errorf("%s: %d of %d flows still open upstream a minute after the guest closed them", p.name, e.up.held.Load(), *flagFlows)
		return
	}
	time.Sleep(10 * time.Second)
	if r.afterFlow, err = e.sample(); err != nil {
		r.err = err
		return
	}
	fmt.Fprintf(os.Stderr, "  flows closed: %s\n", r.afterFlow)
	if !*flagRewave {
		return
	}
	// The second wave shows what a flow costs once the peer's memory has
	// been used before: Go zeroes a reused heap span, touching every page
	// of it, where memory fresh from the kernel is left untouched until
	// written.
	if e.debugAddr != "" {
		for range 2 {
			if _, err := e.debugGet("/debug/pprof/heap?gc=1"); err != nil {
				r.err = fmt.Errorf("%s: forcing a GC: %w", p.name, err)
				return
			}
		}
	}
	if h, err = e.hold(*flagFlows); err != nil {
		r.err = fmt.Errorf("%s: %d flows again: %w", p.name, *flagFlows, err)
		return
	}
	r.again, err = e.sampleHeld(h, fmt.Sprintf("heap-flows-again-%d.pprof", rep))
	r.err = err
	fmt.Fprintf(os.Stderr, "  %d flows again: %s\n", *flagFlows, r.again)
	e.waitHeld(0, time.Minute)
	return r
}

func (s sample) String() string {
	g := ""
	if s.goroutines >= 0 {
		g = fmt.Sprintf(" goroutines %d heap in use %.1f MB", s.goroutines, mb(s.heapInuse))
	}
	return fmt.Sprintf("RSS %.1f MB (anon %.1f, file %.1f) threads %d fds %d%s", mb(s.rss), mb(s.anon), mb(s.file), s.threads, s.fds, g)
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// medianSample takes the median of each figure on its own.
func medianSample(ss []sample) sample {
	med := func(get func(sample) int64) int64 {
		v := make([]int64, len(ss))
		for i, s := range ss {
			v[i] = get(s)
		}
		return benchstats.Median(v)
	}
	return sample{
		rss:        med(func(s sample) int64 { return s.rss }),
		anon:       med(func(s sample) int64 { return s.anon }),
		file:       med(func(s sample) int64 { return s.file }),
		threads:    int(med(func(s sample) int64 { return int64(s.threads) })),
		fds:        int(med(func(s sample) int64 { return int64(s.fds) })),
		goroutines: int(med(func(s sample) int64 { return int64(s.goroutines) })),
		heapInuse:  med(func(s sample) int64 { return s.heapInuse }),
		heapSys:    med(func(s sample) int64 { return s.heapSys }),
	}
}

func printIdle(w io.Writer, rs []idleResult) {
	fmt.Fprintf(w, "Idle (DHCP, one DNS query, one allowed flow, then %s idle) and %d idle established flows; median of %d; MB = 10^6 bytes; RSS = anon + file\n\n", *flagIdle, *flagFlows, *flagReps)
	fmt.Fprintf(w, "| peer | idle RSS MB (anon + file) | %d flows RSS MB (anon + file) | per flow KiB | after closing them MB | %[1]d flows again MB | per flow KiB | threads idle / flows | fds idle / flows | goroutines idle / flows |\n", *flagFlows)
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | failed: %s | | | | | | | | | |\n", r.peer, oneLine(r.err.Error()))
			continue
		}
		g := "—"
		if r.idle.goroutines >= 0 {
			g = fmt.Sprintf("%d / %d", r.idle.goroutines, r.flows.goroutines)
		}
		perFlow := float64(r.flows.rss-r.idle.rss) / 1024 / float64(*flagFlows)
		again, perAgain := "—", "—"
		if r.again.rss > 0 {
			again = fmt.Sprintf("%.1f", mb(r.again.rss))
			perAgain = fmt.Sprintf("%.0f", float64(r.again.rss-r.idle.rss)/1024/float64(*flagFlows))
		}
		fmt.Fprintf(w, "| %s | %.1f (%.1f + %.1f) | %.1f (%.1f + %.1f) | %.0f | %.1f | %s | %s | %d / %d | %d / %d | %s |\n",
			r.peer, mb(r.idle.rss), mb(r.idle.anon), mb(r.idle.file),
			mb(r.flows.rss), mb(r.flows.anon), mb(r.flows.file), perFlow, mb(r.afterFlow.rss), again, perAgain,
			r.idle.threads, r.flows.threads, r.idle.fds, r.flows.fds, g)
	}
}
