package main

import (
	"fmt"
	"os"
	"time"

	"github.com/capsem/capsem/bench/internal/listflag"
)

// h3Protos are the protocols of the HTTP/3 comparison, each measured with
// the same Go client (roundTripper) over one connection.
var h3Protos = []string{"h2", "h3"}

// h3Rep runs the HTTP/3 comparison once: per path of -h3-paths,
// HTTP/2 then HTTP/3 for each measurement, so that drift hits both alike:
// a -h3-bytes download, requests/s of -h3-streams concurrent GET /ping on
// one connection, and the p50 and p99 of GET /ping at concurrency 1.
func (b *bench) h3Rep(rep int) error {
	paths := listflag.Split(*flagH3Paths)
	for _, where := range paths {
		for _, proto := range h3Protos {
			s, err := b.retry(func() (sample, error) { return b.fetch(where, proto) })
			if err != nil {
				return err
			}
			b.add("h3dl/"+proto+"/"+where, s)
			fmt.Fprintf(os.Stderr, "rep %d  download %s %-12s %6.2f Gbit/s (Go client)  %s\n", rep, proto, where, s.v, s.cpu)
		}
	}
	for _, where := range paths {
		for _, proto := range h3Protos {
			s, err := b.retry(func() (sample, error) { return b.load(where, proto, *flagH3Streams, 1, *flagDuration, false) })
			if err != nil {
				return err
			}
			b.add("h3rps/"+proto+"/"+where, s)
			fmt.Fprintf(os.Stderr, "rep %d  req/s    %s c%-3d %-12s %8.0f (one connection)  %s\n", rep, proto, *flagH3Streams, where, s.v, s.cpu)
		}
	}
	for _, where := range paths {
		for _, proto := range h3Protos {
			s, err := b.retry(func() (sample, error) { return b.load(where, proto, 1, 1, *flagLatDur, true) })
			if err != nil {
				return err
			}
			b.add("h3lat/"+proto+"/"+where, s)
			fmt.Fprintf(os.Stderr, "rep %d  latency  %s %-12s p50 %6.0f µs  p99 %6.0f µs  %s\n", rep, proto, where, s.v, s.p99, s.cpu)
		}
	}
	return nil
}

// wantUpstream is the protocol a path's upstream must have been reached
// over when the guest speaks proto: the mitm path's upstream serves
// HTTP/3, so the MITM forwards an HTTP/3 request over it; h2up.test's does
// not, so the MITM falls back to HTTP/2 over TCP.
func wantUpstream(where, proto string) string {
	if proto == "h3" && where != "mitm-h2up" {
		return "HTTP/3.0"
	}
	return "HTTP/2.0"
}

// fetch runs the fetch sub-mode (in the guest but for direct) and returns
// Gbit/s = -h3-bytes / the time from the request to the body's end.
func (b *bench) fetch(where, proto string) (sample, error) {
	addr, sni, ca, _ := b.target(where)
	args := []string{"fetch", "-addr", addr, "-sni", sni, "-ca", ca, "-proto", proto, "-auth", b.authFor(where),
		"-path", fmt.Sprintf("/bytes?n=%d", *flagH3Bytes)}
	var s sample
	var r fetchResult
	cpu, said, err := b.runSub(where, 10*time.Minute, args, &r)
	if err != nil {
		return s, err
	}
	if said != "" {
		// quic-go logs there when it cannot size its UDP buffers.
		fmt.Fprintf(os.Stderr, "mitmbench: fetch %s %s said: %s", where, proto, said)
	}
	if r.Bytes != *flagH3Bytes || r.Seconds <= 0 {
		return s, fmt.Errorf("fetch %s %s: moved %d bytes of %d in %.3f s", where, proto, r.Bytes, *flagH3Bytes, r.Seconds)
	}
	if want := wantUpstream(where, proto); r.Upstream != want {
		return s, fmt.Errorf("fetch %s %s: the upstream was reached over %q, want %s", where, proto, r.Upstream, want)
	}
	s.v, s.cpu = float64(r.Bytes)*8/r.Seconds/1e9, cpu
	return s, nil
}
