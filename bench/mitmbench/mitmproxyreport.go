package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/capsem/capsem/bench/internal/listflag"
)

// The mitmproxy columns of the TCP table come after every other (the
// mitm-secrets ones included), so that those stay where they have always
// been: mitmproxy's value, and the MITM's against it — a ratio of rates,
// or for latency the latency each adds over direct and the ratio of the
// two (MITM's added / mitmproxy's added: below 100 % the MITM adds less).

// mitmproxyMeasured reports whether the mitmproxy path is in this run.
func mitmproxyMeasured() bool { return listflag.Has(*flagPaths, "mitmproxy") }

// mitmproxyColumns is the columns' heading and rule, "" without the path.
func mitmproxyColumns() (head, rule string) {
	if !mitmproxyMeasured() {
		return "", ""
	}
	return " " + pathNames["mitmproxy"] + " | MITM vs mitmproxy |", "---:|---:|"
}

// mitmproxyCells is a rate row's mitmproxy cells (key: the row's prefix).
func (b *bench) mitmproxyCells(key, format string) string {
	if !mitmproxyMeasured() {
		return ""
	}
	v, _, _, ok := b.med(key + "mitmproxy")
	if !ok {
		return " – | – |"
	}
	r := "–"
	if m, _, _, ok := b.med(key + "mitm"); ok && v > 0 {
		r = fmt.Sprintf("%.0f %%", 100*m/v)
	}
	return fmt.Sprintf(" "+format+" | %s |", v, r)
}

// mitmproxyLatencyCells is a latency row's mitmproxy cells: its p50 or
// p99 (pick), and the MITM's added latency over direct against
// mitmproxy's.
func (b *bench) mitmproxyLatencyCells(pick func(v, p99 float64) float64) string {
	if !mitmproxyMeasured() {
		return ""
	}
	k := "lat/h1/"
	x, xp, _, ok := b.med(k + "mitmproxy")
	if !ok {
		return " – | – |"
	}
	r := "–"
	m, mp, _, ok1 := b.med(k + "mitm")
	d, dp, _, ok2 := b.med(k + "direct")
	if ok1 && ok2 {
		am, ax := pick(m, mp)-pick(d, dp), pick(x, xp)-pick(d, dp)
		r = fmt.Sprintf("+%.0f vs +%.0f µs", am, ax)
		if ax > 0 {
			r += fmt.Sprintf(" = %.0f %%", 100*am/ax)
		}
	}
	return fmt.Sprintf(" %.0f | %s |", pick(x, xp), r)
}

// printMitmproxyNote says what the mitmproxy column ran.
func printMitmproxyNote(w io.Writer) {
	if !mitmproxyMeasured() || listflag.Has(*flagSkip, "dl") && listflag.Has(*flagSkip, "ul") && listflag.Has(*flagSkip, "rps") && listflag.Has(*flagSkip, "lat") {
		return
	}
	fmt.Fprintf(w, "\nThe mitmproxy column: mitmdump (%s) --mode transparent %s, the router of a namespace of its own over a veth pair (nft redirect); its CPU is in the capsem-net column below. mitmproxy has no HTTP/3.\n",
		mitmproxyVersionLine, strings.Join(mitmproxyFlags, " "))
}
