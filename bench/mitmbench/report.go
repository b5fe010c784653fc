package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/capsem/capsem/bench/internal/listflag"
	"github.com/capsem/capsem/bench/internal/stats"
)

// med returns the median value, p99 and CPU use of a measurement; CPU
// figures are medians per party.
func (b *bench) med(key string) (v, p99 float64, cpu cpuUse, ok bool) {
	ss := b.samples[key]
	if len(ss) == 0 {
		return 0, 0, cpuUse{}, false
	}
	pick := func(f func(sample) float64) float64 {
		var xs []float64
		for _, s := range ss {
			xs = append(xs, f(s))
		}
		return stats.Median(xs)
	}
	cpu = cpuUse{
		client:   pick(func(s sample) float64 { return s.cpu.client }),
		capsem:   pick(func(s sample) float64 { return s.cpu.capsem }),
		pump:     pick(func(s sample) float64 { return s.cpu.pump }),
		upstream: pick(func(s sample) float64 { return s.cpu.upstream }),
		kernel:   pick(func(s sample) float64 { return s.cpu.kernel }),
		other:    pick(func(s sample) float64 { return s.cpu.other }),
		machine:  pick(func(s sample) float64 { return s.cpu.machine }),
	}
	return pick(func(s sample) float64 { return s.v }), pick(func(s sample) float64 { return s.p99 }), cpu, true
}

var protoName = map[string]string{"h1": "HTTP/1.1", "h1-new": "HTTP/1.1 (a connection per request)", "h2": "HTTP/2", "h3": "HTTP/3"}

func (b *bench) print(w io.Writer) {
	cell := func(key string, format string) string {
		v, _, _, ok := b.med(key)
		if !ok {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	ratio := func(a, base string) string {
		x, _, _, ok1 := b.med(a)
		y, _, _, ok2 := b.med(base)
		if !ok1 || !ok2 || y == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f %%", 100*x/y)
	}
	// The mitm-secrets columns come last, so that the others stay where
	// they have always been.
	secrets := listflag.Has(*flagPaths, "mitm-secrets")
	head, rule := "", ""
	if secrets {
		head, rule = " "+pathNames["mitm-secrets"]+" | secrets + DLP vs off (target ≥ 90 %) |", "---:|---|"
	}
	// sec is the mitm-secrets cells of a row: the value and its ratio to
	// mitm's, with the verdict.
	sec := func(key, format string) string {
		if !secrets {
			return ""
		}
		r := "–"
		if x, _, _, ok := b.med(key + "mitm-secrets"); ok {
			if y, _, _, ok := b.med(key + "mitm"); ok && y > 0 {
				r = fmt.Sprintf("%.0f %% %s", 100*x/y, metOrNot(x >= 0.9*y))
			}
		}
		return fmt.Sprintf(" %s | %s |", cell(key+"mitm-secrets", format), r)
	}
	if *flagRTT > 0 {
		fmt.Fprintf(w, "The upstream is %s of round trip away from every path (-upstream-rtt: a relay on loopback holds each chunk half of it each way, and a connection's first bytes a round trip more).\n\n", *flagRTT)
	}
	b.printTCP(w, secrets, head, rule, cell, ratio, sec)
	printMitmproxyNote(w)
	if !listflag.Has(*flagSkip, "h3") {
		b.printH3(w)
	}
	b.printCPU(w)
}

// printTCP writes the table of the curl and load generator runs (HTTP/1.1
// and HTTP/2), unless all of them were skipped.
func (b *bench) printTCP(w io.Writer, secrets bool, head, rule string, cell func(key, format string) string, ratio func(a, base string) string, sec func(key, format string) string) {
	if listflag.Has(*flagSkip, "dl") && listflag.Has(*flagSkip, "ul") && listflag.Has(*flagSkip, "rps") && listflag.Has(*flagSkip, "lat") {
		return
	}
	mpHead, mpRule := mitmproxyColumns()
	fmt.Fprintf(w, "| measurement | direct (host → upstream) | passthrough (TCP forwarding) | MITM | MITM vs passthrough | MITM vs direct | target |%s%s\n", head, mpHead)
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---|%s%s\n", rule, mpRule)
	for _, kind := range []string{"dl", "ul"} {
		if listflag.Has(*flagSkip, kind) {
			continue
		}
		for _, proto := range listflag.Split(*flagDLProtos) {
			k := kind + "/" + proto + "/"
			verdict := "–"
			if m, _, _, ok := b.med(k + "mitm"); ok && kind == "dl" {
				if p, _, _, ok := b.med(k + "pass"); ok && p > 0 {
					verdict = metOrNot(m >= 0.5*p) + " (≥ 50 % of passthrough)"
				}
			}
			what := sizeName(*flagBytes) + " download"
			if kind == "ul" {
				what = sizeName(*flagBytes) + " upload (" + *flagULBody + ")"
			}
			fmt.Fprintf(w, "| %s, %s, Gbit/s | %s | %s | %s | %s | %s | %s |%s%s\n", what, protoName[proto],
				cell(k+"direct", "%.2f"), cell(k+"pass", "%.2f"), cell(k+"mitm", "%.2f"), ratio(k+"mitm", k+"pass"), ratio(k+"mitm", k+"direct"), verdict, sec(k, "%.2f"), b.mitmproxyCells(k, "%.2f"))
		}
	}
	if !listflag.Has(*flagSkip, "rps") {
		for _, conns := range connsList() {
			for _, proto := range listflag.Split(*flagRPSProtos) {
				k := rpsKey(proto, conns)
				verdict := "–"
				if m, _, _, ok := b.med(k + "mitm"); ok {
					verdict = metOrNot(m >= 10000) + " (≥ 10,000)"
				}
				what := fmt.Sprintf("%d keep-alive connections", conns)
				switch proto {
				case "h2":
					what = fmt.Sprintf("%d concurrent streams on %d connection(s)", conns, *flagH2Conns)
				case "h1-new":
					what = fmt.Sprintf("%d at a time", conns)
					verdict = "–"
				}
				fmt.Fprintf(w, "| requests/s, %s, %s, GET /ping | %s | %s | %s | %s | %s | %s |%s%s\n", protoName[proto], what,
					cell(k+"direct", "%.0f"), cell(k+"pass", "%.0f"), cell(k+"mitm", "%.0f"), ratio(k+"mitm", k+"pass"), ratio(k+"mitm", k+"direct"), verdict, sec(k, "%.0f"), b.mitmproxyCells(k, "%.0f"))
			}
		}
	}
	if !listflag.Has(*flagSkip, "lat") {
		k := "lat/h1/"
		added := func(pick func(v, p99 float64) float64) (string, string) {
			m, mp, _, ok := b.med(k + "mitm")
			if !ok {
				return "–", "–"
			}
			vs := func(base string) string {
				x, xp, _, ok := b.med(k + base)
				if !ok {
					return "–"
				}
				return fmt.Sprintf("+%.0f µs", pick(m, mp)-pick(x, xp))
			}
			return vs("pass"), vs("direct")
		}
		for _, pct := range []string{"p50", "p99"} {
			pick := func(v, p99 float64) float64 { return v }
			if pct == "p99" {
				pick = func(v, p99 float64) float64 { return p99 }
			}
			c := func(where string) string {
				v, p99, _, ok := b.med(k + where)
				if !ok {
					return "–"
				}
				return fmt.Sprintf("%.0f", pick(v, p99))
			}
			a, d := added(pick)
			extra := ""
			if secrets {
				vs := "–"
				m, mp, _, ok1 := b.med(k + "mitm")
				x, xp, _, ok2 := b.med(k + "mitm-secrets")
				if ok1 && ok2 {
					vs = fmt.Sprintf("%+.0f µs", pick(x, xp)-pick(m, mp))
				}
				extra = fmt.Sprintf(" %s | %s |", c("mitm-secrets"), vs)
			}
			fmt.Fprintf(w, "| latency %s, µs, HTTP/1.1 keep-alive, concurrency 1 | %s | %s | %s | %s | %s | added %s: %s |%s%s\n", pct,
				c("direct"), c("pass"), c("mitm"), a, d, pct, d, extra, b.mitmproxyLatencyCells(pick))
		}
	}
}

// printCPU writes the CPU each party used in each run.
func (b *bench) printCPU(w io.Writer) {
	fmt.Fprintf(w, "\nCPU during each run, in cores of %d (median of the repetitions): the client (curl or the load generator), capsem-net (on the mitmproxy path: mitmdump), the frame pump (the benchmark process), the upstream server, interrupts and softirqs (network processing not charged to a process), other processes, and the whole machine.\n\n", runtime.NumCPU())
	fmt.Fprintf(w, "| run | path | client | capsem-net | pump | upstream | softirq | other | machine |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range b.order {
		_, _, cpu, _ := b.med(k)
		p := strings.Split(k, "/")
		run := map[string]string{"dl": "download", "ul": "upload", "rps": "requests/s", "lat": "latency",
			"h3dl": "download (Go client)", "h3rps": "requests/s one connection", "h3lat": "latency (Go client)"}[p[0]] + " " + protoName[p[1]]
		if p[0] == "rps" {
			run += ", " + p[2] + " conns"
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", run, p[len(p)-1],
			cpu.client, cpu.capsem, cpu.pump, cpu.upstream, cpu.kernel, cpu.other, cpu.machine)
	}
	fmt.Fprintf(w, "\nEach run started on an idle machine (background load below 0.15 cores, waited for up to a minute); the most seen at a start: %.2f cores. Runs during which other processes took more than %.2f cores were taken again: %d retaken, %d kept with interference after 4 attempts.\n", maxBackground, maxOther, retried, interfered)
}

func metOrNot(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func sizeName(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}
