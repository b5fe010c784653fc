package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
