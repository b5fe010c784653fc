package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// soakResult is one peer's soak.
type soakResult struct {
	peer    string
	samples []sample // at: since the soak started
	counts  map[string]int
	errors  map[string]string
	cpu     float64 // the peer's CPU, in cores, averaged over the soak
	err     error
}

// soak runs the mixed traffic against every peer at once, each in its own
// namespace with its own upstream, sampling them all every -sample.
func soak(peers []peer) []soakResult {
	results := make([]soakResult, len(peers))
	envs := make([]*env, len(peers))
	for i, p := range peers {
		results[i].peer = p.name
		e, err := startEnv(p)
		if err != nil {
			results[i].err = err
			continue
		}
		envs[i] = e
		defer e.stop()
	}
	names := []string{}
	for _, p := range peers {
		names = append(names, p.name)
	}
	fmt.Fprintf(os.Stderr, "soakbench: soak of %s: %s\n", *flagSoak, strings.Join(names, ", "))
	t0 := time.Now()
	cpu0 := make([]float64, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		if e == nil {
			continue
		}
		cpu0[i] = procCPU(e.cmd.Process.Pid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.guest(*flagSoak+2*time.Minute, "soak", strconv.FormatFloat(flagSoak.Seconds(), 'f', 3, 64))
			if err != nil {
				results[i].err = fmt.Errorf("soak guest: %v: %s", err, tail(out))
				return
			}
			var res struct {
				Counts map[string]int    `json:"counts"`
				Errors map[string]string `json:"errors"`
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
				results[i].err = fmt.Errorf("soak guest output: %v: %s", err, tail(out))
				return
			}
			results[i].counts, results[i].errors = res.Counts, res.Errors
		}()
	}
	guestsDone := make(chan struct{})
	go func() { wg.Wait(); close(guestsDone) }()
	tick := time.NewTicker(*flagSample)
	defer tick.Stop()
	sampleAll := func() {
		for i, e := range envs {
			if e == nil || results[i].err != nil {
				continue
			}
			s, err := e.sample()
			if err != nil {
				results[i].err = err
				continue
			}
			s.at = time.Since(t0)
			results[i].samples = append(results[i].samples, s)
		}
	}
	sampleAll()
	profiled := false
	for done := false; !done; {
		select {
		case <-tick.C:
			sampleAll()
			if !profiled && time.Since(t0) >= window() {
				profiled = true
				for _, e := range envs {
					if e != nil {
						e.heapProfile("heap-soak-first.pprof")
					}
				}
			}
			if n := len(results[0].samples); n%12 == 0 && n > 0 {
				fmt.Fprintf(os.Stderr, "  %s\n", time.Since(t0).Round(time.Second))
			}
		case <-guestsDone:
			done = true
		}
	}
	for i, e := range envs {
		if e == nil {
			continue
		}
		e.heapProfile("heap-soak-last.pprof")
		results[i].cpu = (procCPU(e.cmd.Process.Pid) - cpu0[i]) / time.Since(t0).Seconds()
		if *flagCSV != "" {
			writeCSV(filepath.Join(*flagCSV, "soak-"+e.p.name+".csv"), results[i].samples)
		}
	}
	return results
}

// window is how long "the first minute" and "the last minute" are: a
// minute, or a third of a shorter soak.
func window() time.Duration {
	return min(time.Minute, *flagSoak/3)
}

func writeCSV(path string, ss []sample) {
	var b strings.Builder
	b.WriteString("seconds,rss_bytes,anon_bytes,file_bytes,threads,fds,goroutines,heap_inuse_bytes,heap_sys_unreleased_bytes\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "%.1f,%d,%d,%d,%d,%d,%d,%d,%d\n", s.at.Seconds(), s.rss, s.anon, s.file, s.threads, s.fds, s.goroutines, s.heapInuse, s.heapSys)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "soakbench:", err)
	}
}

// stats summarises the samples within [from, to) of the soak.
type stats struct {
	n                         int
	rss, anon, heap           float64 // means, bytes
	maxRSS                    int64
	goroutines, fds, threads  float64 // means
	maxGoroutines, maxFDs, mx int
}

func summarise(ss []sample, from, to time.Duration) stats {
	var st stats
	for _, s := range ss {
		if s.at < from || s.at >= to {
			continue
		}
		st.n++
		st.rss += float64(s.rss)
		st.anon += float64(s.anon)
		st.heap += float64(s.heapInuse)
		st.goroutines += float64(s.goroutines)
		st.fds += float64(s.fds)
		st.threads += float64(s.threads)
		st.maxRSS = max(st.maxRSS, s.rss)
		st.maxGoroutines = max(st.maxGoroutines, s.goroutines)
		st.maxFDs = max(st.maxFDs, s.fds)
		st.mx = max(st.mx, s.threads)
	}
	if st.n > 0 {
		n := float64(st.n)
		st.rss, st.anon, st.heap = st.rss/n, st.anon/n, st.heap/n
		st.goroutines, st.fds, st.threads = st.goroutines/n, st.fds/n, st.threads/n
	}
	return st
}

func printSoak(w io.Writer, rs []soakResult) {
	win := window()
	mode := "all peers at once, each in its own namespace"
	if *flagSoakSerial {
		mode = "one peer after the other"
	}
	fmt.Fprintf(w, "Soak: %s of mixed traffic (%s), sampled every %s; \"first\" and \"last\" are the means over the first and last %s; MB = 10^6 bytes\n\n", *flagSoak, mode, *flagSample, win.Round(time.Second))
	fmt.Fprintf(w, "Traffic per peer: %.0f allowed + %.0f denied DNS queries/s (not for passt), %.0f short flows/s (4 KiB down), %.0f denied SYNs/s, %d long transfers at a time (%d MiB at %d MiB/s, alternating down and up)\n\n",
		*flagDNSRate, *flagDeniedDNSRate, *flagFlowRate, *flagSYNRate, *flagLong, *flagLongBytes>>20, *flagLongRate>>20)
	fmt.Fprintf(w, "| peer | RSS first → last MB | growth | RSS slope, 2nd half, MB/min | max RSS MB | anon first → last MB | Go heap in use first → last MB | goroutines first → last (max) | fds first → last (max) | threads first → last (max) | CPU cores |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | failed: %s | | | | | | | | | |\n", r.peer, oneLine(r.err.Error()))
			continue
		}
		first, last := summarise(r.samples, 0, win), summarise(r.samples, *flagSoak-win, *flagSoak+time.Hour)
		heap, g := "—", "—"
		if first.goroutines >= 0 && r.peer == "capsem-net" {
			heap = fmt.Sprintf("%.1f → %.1f", first.heap/1e6, last.heap/1e6)
			g = fmt.Sprintf("%.0f → %.0f (%d)", first.goroutines, last.goroutines, max(first.maxGoroutines, last.maxGoroutines, maxOf(r.samples, func(s sample) int { return s.goroutines })))
		}
		fmt.Fprintf(w, "| %s | %.1f → %.1f | %+.1f %% | %+.2f | %.1f | %.1f → %.1f | %s | %s | %.0f → %.0f (%d) | %.0f → %.0f (%d) | %.2f |\n",
			r.peer, first.rss/1e6, last.rss/1e6, 100*(last.rss-first.rss)/first.rss, slope(r.samples, *flagSoak/2)*60/1e6,
			mb(maxOf64(r.samples, func(s sample) int64 { return s.rss })),
			first.anon/1e6, last.anon/1e6, heap, g,
			first.fds, last.fds, maxOf(r.samples, func(s sample) int { return s.fds }),
			first.threads, last.threads, maxOf(r.samples, func(s sample) int { return s.threads }), r.cpu)
	}
	fmt.Fprintf(w, "\nWhat the guest did (ok / failed):\n\n")
	for _, r := range rs {
		if r.err != nil {
			continue
		}
		var parts []string
		for _, k := range []string{"dns-allowed", "dns-denied", "short", "syn-denied", "long-down", "long-up"} {
			ok, fail := r.counts[k+" ok"], r.counts[k+" fail"]
			if ok+fail == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %d / %d", k, ok, fail))
		}
		fmt.Fprintf(w, "- %s: %s\n", r.peer, strings.Join(parts, ", "))
		for k, v := range r.errors {
			fmt.Fprintf(w, "  - last %s error: %s\n", k, oneLine(v))
		}
	}
}

// slope is the least-squares slope of RSS over the samples from `from` on,
// in bytes per second: growth that goes on after the warm-up, which a
// comparison of the first and last minutes mixes with it.
func slope(ss []sample, from time.Duration) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, s := range ss {
		if s.at < from {
			continue
		}
		x, y := s.at.Seconds(), float64(s.rss)
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	if n < 2 || n*sxx == sx*sx {
		return 0
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

func maxOf(ss []sample, get func(sample) int) int {
	m := 0
	for _, s := range ss {
		m = max(m, get(s))
	}
	return m
}

func maxOf64(ss []sample, get func(sample) int64) int64 {
	var m int64
	for _, s := range ss {
		m = max(m, get(s))
	}
	return m
}
