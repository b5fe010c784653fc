package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/capsem/capsem/bench/internal/stats"
)

// budgetUs is the budget for what the gateway adds at p50: 2 ms, well
// under a model call's round trip, so a tool call through the gateway
// costs the agent nothing it would notice.
const budgetUs = 2000

// med is the median over the repetitions of one figure of a path.
func (b *bench) med(where string, f func(sample) float64) (float64, bool) {
	ss := b.samples[where]
	if len(ss) == 0 {
		return 0, false
	}
	var xs []float64
	for _, s := range ss {
		xs = append(xs, f(s))
	}
	return stats.Median(xs), true
}

var protoName = map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2"}

func p50(s sample) float64   { return s.P50us }
func p99(s sample) float64   { return s.P99us }
func cpuUs(s sample) float64 { return s.capsemUs }

func (b *bench) print(w io.Writer) {
	fmt.Fprintf(w, "Command: go run ./bench/mcpbench %s\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(w, "%d repetitions (median reported), each path one session (HTTP paths: %s): %d warm-up then %d sequential tools/call echo; %d CPUs (%s/%s); %s.\n\n",
		*flagReps, protoName[*flagProto], *flagWarmup, *flagN, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, b.elapsed.Round(1e9))
	fmt.Fprintf(w, "| path | p50 µs | p90 µs | p99 µs | mean µs | max µs | capsem-net CPU µs/call | p50 of each repetition |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, where := range pathOrder {
		ss := b.samples[where]
		if len(ss) == 0 {
			continue
		}
		cell := func(f func(sample) float64) string {
			v, _ := b.med(where, f)
			return fmt.Sprintf("%.0f", v)
		}
		var reps []string
		for _, s := range ss {
			reps = append(reps, fmt.Sprintf("%.0f", s.P50us))
		}
		c := "–"
		if where == "gateway" || where == "mitm" {
			c = cell(cpuUs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", pathNames[where],
			cell(p50), cell(func(s sample) float64 { return s.P90us }), cell(p99),
			cell(func(s sample) float64 { return s.MeanUs }), cell(func(s sample) float64 { return s.MaxUs }), c, strings.Join(reps, ", "))
	}
	added := func(a, base string, f func(sample) float64) (float64, bool) {
		x, ok1 := b.med(a, f)
		y, ok2 := b.med(base, f)
		return x - y, ok1 && ok2
	}
	fmt.Fprintln(w)
	if d50, ok := added("gateway", "direct", p50); ok {
		d99, _ := added("gateway", "direct", p99)
		verdict := "**met**"
		if d50 > budgetUs {
			verdict = "**missed**"
		}
		// Per repetition too: the medians of two paths need not come
		// from the same repetition.
		var per []float64
		for i := range min(len(b.samples["gateway"]), len(b.samples["direct"])) {
			per = append(per, b.samples["gateway"][i].P50us-b.samples["direct"][i].P50us)
		}
		slices.Sort(per)
		fmt.Fprintf(w, "Added by the gateway (gateway − direct): p50 **%+.0f µs**, p99 %+.0f µs (per repetition, p50: %.0f to %.0f µs); budget p50 ≤ %d µs: %s.\n",
			d50, d99, per[0], per[len(per)-1], budgetUs, verdict)
	}
	if d50, ok := added("mitm", "http", p50); ok {
		d99, _ := added("mitm", "http", p99)
		fmt.Fprintf(w, "Added by capsem-net and the MITM to a remote HTTP MCP server (mitm − http): p50 %+.0f µs, p99 %+.0f µs.\n", d50, d99)
	}
	if d50, ok := added("gateway", "mitm", p50); ok {
		d99, _ := added("gateway", "mitm", p99)
		fmt.Fprintf(w, "The gateway and its stdio server against a remote HTTP server, both behind the MITM (gateway − mitm): p50 %+.0f µs, p99 %+.0f µs.\n", d50, d99)
	}
	fmt.Fprintf(w, "\nEach path waited up to 15 s for an idle machine (below 10 %% busy); the busiest machine a path started on: %.0f %% busy.\n", 100*maxBackground)
}
