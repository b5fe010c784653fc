package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	benchstats "github.com/capsem/capsem/bench/internal/stats"
	"github.com/capsem/capsem/tests/harness"
)

var (
	flagPeers         = flag.String("peers", "capsem-net,gvproxy,passt", "peers to measure, comma separated")
	flagSkip          = flag.String("skip", "", "measurements to skip: any of idle,flows,soak (flows needs idle)")
	flagReps          = flag.Int("reps", 3, "repetitions of the idle and flows measurements, each with a fresh peer and namespace (the median is reported)")
	flagIdle          = flag.Duration("idle", 30*time.Second, "how long the guest idles before the idle RSS is read")
	flagFlows         = flag.Int("flows", 1000, "idle TCP connections the guest holds open")
	flagRewave        = flag.Bool("rewave", true, "after the flows are closed, open them again once the peer has collected its garbage (capsem-net: two GCs forced through its pprof endpoint)")
	flagSoak          = flag.Duration("soak", 10*time.Minute, "duration of the mixed-traffic soak (e.g. 20s for a smoke run)")
	flagSoakSerial    = flag.Bool("soak-serial", false, "soak one peer after the other instead of all at once")
	flagSample        = flag.Duration("sample", 5*time.Second, "sampling interval during the soak")
	flagDNSRate       = flag.Float64("dns-rate", 20, "soak: DNS queries/s for the allowed name")
	flagDeniedDNSRate = flag.Float64("denied-dns-rate", 10, "soak: DNS queries/s for a new denied name each")
	flagFlowRate      = flag.Float64("flow-rate", 10, "soak: short flows/s (connect, 4 KiB down, close)")
	flagSYNRate       = flag.Float64("syn-rate", 10, "soak: denied SYNs/s")
	flagLong          = flag.Int("long", 2, "soak: concurrent long transfers, alternating download and upload")
	flagLongBytes     = flag.Int64("long-bytes", 32<<20, "soak: size of each long transfer")
	flagLongRate      = flag.Int64("long-rate", 4<<20, "soak: pace of each long transfer, bytes/s")
	flagMTU           = flag.Int("mtu", 1500, "guest link MTU")
	flagCache         = flag.String("cache", ".cache/bin", "where built peer binaries are kept")
	flagCapsemBin     = flag.String("capsem-bin", "", "a capsem-net binary to measure instead of building ./cmd/capsem-net")
	flagCapsemArgs    = flag.String("capsem-args", "", "extra capsem-net flags, space separated")
	flagCapsemEnv     = flag.String("capsem-env", "", "extra environment for capsem-net, e.g. \"GOGC=50 GOMEMLIMIT=24MiB\"")
	flagProfile       = flag.String("profile", "", "write capsem-net heap profiles (idle, flows, soak start and end) into DIR")
	flagCSV           = flag.String("csv", "", "write every soak sample to DIR/soak-PEER.csv")
	flagVerbose       = flag.Bool("v", false, "print each peer's output when it stops")
)

func main() {
	flag.Parse()
	if why := harness.Requirements("python3"); why != "" {
		fmt.Fprintln(os.Stderr, "soakbench:", why)
		os.Exit(2)
	}
	cache, _ := filepath.Abs(*flagCache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		fatal(err)
	}
	for _, d := range []string{*flagProfile, *flagCSV} {
		if d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				fatal(err)
			}
		}
	}
	var peers []peer
	for _, name := range strings.Split(*flagPeers, ",") {
		p, err := makePeer(strings.TrimSpace(name), cache)
		if err != nil {
			fmt.Fprintf(os.Stderr, "soakbench: %s unavailable: %v\n", name, err)
			continue
		}
		peers = append(peers, p)
	}
	if len(peers) == 0 {
		fatal(fmt.Errorf("no peer to measure (-peers %q)", *flagPeers))
	}
	start := time.Now()
	host, _ := os.Hostname()
	fmt.Printf("soakbench %s on %s: %s\n\n", start.UTC().Format("2006-01-02 15:04 UTC"), host, strings.Join(os.Args[1:], " "))

	if !skip("idle") {
		load := startLoad()
		var results []idleResult
		for _, p := range peers {
			r := measureIdleReps(p)
			if r.err != nil {
				fmt.Fprintf(os.Stderr, "soakbench: %v\n", r.err)
			}
			results = append(results, r)
		}
		printIdle(os.Stdout, results)
		fmt.Printf("\nMachine during idle and flows: %s\n\n", load.stop())
	}
	if !skip("soak") {
		var results []soakResult
		load := startLoad()
		if *flagSoakSerial {
			for _, p := range peers {
				results = append(results, soak([]peer{p})...)
			}
		} else {
			results = soak(peers)
		}
		machine := load.stop()
		printSoak(os.Stdout, results)
		fmt.Printf("\nMachine during the soak: %s\n", machine)
	}
	fmt.Fprintf(os.Stderr, "soakbench: done in %s\n", time.Since(start).Round(time.Second))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "soakbench:", err)
	os.Exit(1)
}

func skip(what string) bool {
	for _, s := range strings.Split(*flagSkip, ",") {
		if strings.TrimSpace(s) == what {
			return true
		}
	}
	return false
}

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

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
