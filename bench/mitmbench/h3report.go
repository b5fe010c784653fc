package main

import (
	"fmt"
	"io"

	"github.com/capsem/capsem/bench/internal/listflag"
)

// h3Upstreams says, per path of the HTTP/3 comparison, what the upstream
// was reached over by the HTTP/2 row and by the HTTP/3 row (the fetch
// sub-mode checks it on every download: wantUpstream).
var h3Upstreams = map[string]string{
	"direct":    "HTTP/2 / HTTP/3 (no MITM)",
	"mitm":      "HTTP/2 over TCP / HTTP/3",
	"mitm-h2up": "HTTP/2 over TCP / HTTP/2 over TCP",
}

// printH3 writes the HTTP/3 comparison's table: per measurement and path,
// HTTP/2 and HTTP/3 with the same Go client, their ratio (latency: their
// difference), and the target (an HTTP/3 download through the MITM at
// ≥ 80 % of HTTP/2's).
func (b *bench) printH3(w io.Writer) {
	fmt.Fprintf(w, "\nHTTP/3 beside HTTP/2, the same Go client (net/http's HTTP/2, quic-go's http3), one connection each:\n\n")
	fmt.Fprintf(w, "| measurement | path | upstream reached over (HTTP/2 row / HTTP/3 row) | HTTP/2 | HTTP/3 | HTTP/3 vs HTTP/2 | target |\n")
	fmt.Fprintf(w, "|---|---|---|---:|---:|---:|---|\n")
	type row struct {
		key, what, format string
		pick              func(v, p99 float64) float64
		target            bool
		diff              bool // HTTP/3 minus HTTP/2 (latency), not their ratio
	}
	value := func(v, _ float64) float64 { return v }
	rows := []row{
		{"h3dl", sizeName(*flagH3Bytes) + " download, Gbit/s", "%.2f", value, true, false},
		{"h3rps", fmt.Sprintf("requests/s, %d concurrent GET /ping on one connection", *flagH3Streams), "%.0f", value, false, false},
		{"h3lat", "latency p50, µs, GET /ping, concurrency 1", "%.0f", value, false, true},
		{"h3lat", "latency p99, µs, GET /ping, concurrency 1", "%.0f", func(_, p99 float64) float64 { return p99 }, false, true},
	}
	for _, r := range rows {
		for _, where := range listflag.Split(*flagH3Paths) {
			get := func(proto string) (float64, bool) {
				v, p99, _, ok := b.med(r.key + "/" + proto + "/" + where)
				return r.pick(v, p99), ok
			}
			h2, ok2 := get("h2")
			h3, ok3 := get("h3")
			c2, c3, ratio, verdict := "–", "–", "–", "–"
			if ok2 {
				c2 = fmt.Sprintf(r.format, h2)
			}
			if ok3 {
				c3 = fmt.Sprintf(r.format, h3)
			}
			if ok2 && ok3 && r.diff {
				ratio = fmt.Sprintf("%+.0f µs", h3-h2)
			} else if ok2 && ok3 && h2 > 0 {
				ratio = fmt.Sprintf("%.0f %%", 100*h3/h2)
				if r.target && where != "direct" {
					verdict = metOrNot(h3 >= 0.8*h2) + " (≥ 80 % of HTTP/2)"
				}
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.what, pathNames[where], h3Upstreams[where], c2, c3, ratio, verdict)
		}
	}
}
