package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/capsem/capsem/bench/internal/guestns"
	"github.com/capsem/capsem/bench/internal/listflag"
	"github.com/capsem/capsem/bench/internal/peerbin"
	"github.com/capsem/capsem/bench/internal/upstream"
	"github.com/capsem/capsem/tests/harness"
)

var (
	flagReps    = flag.Int("reps", 3, "repetitions, each with a fresh capsem-net, namespace and MCP sessions (the median is reported)")
	flagN       = flag.Int("n", 2000, "measured tools/call per path and repetition, one after another")
	flagWarmup  = flag.Int("warmup", 50, "tools/call made before the measured ones, in the same session")
	flagPaths   = flag.String("paths", "direct,gateway,mitm,http", "paths to measure: direct (host, stdio), gateway (guest → MITM → gateway → stdio), mitm (guest → MITM → remote HTTP server), http (host → remote HTTP server)")
	flagProto   = flag.String("proto", "h2", "HTTP version of the streamable-HTTP paths: h2 (what the Go SDK's client speaks over TLS) or h1 (what fetch in Node, the TypeScript SDK and claude, speaks)")
	flagMTU     = flag.Int("mtu", 1500, "guest link MTU")
	flagProfile = flag.String("profile", "", "write a capsem-net CPU profile per repetition into DIR")
	flagVerbose = flag.Bool("v", false, "print capsem-net's output when it stops")
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "client":
			clientMain(os.Args[2:])
			return
		case "upstream":
			upstreamMain(os.Args[2:])
			return
		}
	}
	flag.Parse()
	if _, ok := protoName[*flagProto]; !ok {
		fatal(fmt.Errorf("-proto %q: want h1 or h2", *flagProto))
	}
	for _, p := range listflag.Split(*flagPaths) {
		if _, ok := pathNames[p]; !ok {
			fatal(fmt.Errorf("-paths: unknown path %q (want any of direct,gateway,mitm,http)", p))
		}
	}
	if why := harness.Requirements(); why != "" {
		fmt.Fprintln(os.Stderr, "mcpbench:", why)
		os.Exit(2)
	}
	b, err := setup()
	if err != nil {
		fatal(err)
	}
	defer b.close()
	start := time.Now()
	for rep := 1; rep <= *flagReps; rep++ {
		if err := b.rep(rep); err != nil {
			b.close()
			fatal(fmt.Errorf("repetition %d: %w", rep, err))
		}
	}
	b.elapsed = time.Since(start)
	fmt.Fprintf(os.Stderr, "mcpbench: %d repetitions in %s\n", *flagReps, b.elapsed.Round(time.Second))
	b.print(os.Stdout)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mcpbench:", err)
	os.Exit(1)
}

// bench is the state shared by every repetition.
type bench struct {
	dir        string
	exe        string // this program, re-executed as client and upstream
	capsemNet  string
	capsem     string // cmd/capsem, whose mcp-test-server is the stdio server
	upstreamCA string
	capsemCA   string // <ca-dir>/ca.pem, the CA the guest trusts
	caDir      string
	upstream   *upstream.Process
	env        *guestns.Env // the current repetition's guest
	samples    map[string][]sample
	elapsed    time.Duration
}

// sample is one path's measurement in one repetition.
type sample struct {
	callResult
	capsemUs float64 // capsem-net's CPU per call, µs (guest paths)
}

func setup() (*bench, error) {
	b := &bench{samples: map[string][]sample{}}
	var err error
	if b.dir, err = os.MkdirTemp("", "mcpbench"); err != nil {
		return nil, err
	}
	if b.exe, err = os.Executable(); err != nil {
		return nil, err
	}
	b.capsemNet = filepath.Join(b.dir, "capsem-net")
	b.capsem = filepath.Join(b.dir, "capsem")
	fmt.Fprintln(os.Stderr, "mcpbench: building capsem-net and capsem")
	if err := peerbin.BuildCapsemNet(b.capsemNet); err != nil {
		return nil, err
	}
	if out, err := exec.Command("go", "build", "-o", b.capsem, "./cmd/capsem").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/capsem (run from the repository root): %v: %s", err, out)
	}
	caPath, certPath, keyPath, err := upstream.WritePKI(b.dir, upstreamName)
	if err != nil {
		return nil, err
	}
	b.upstreamCA = caPath
	b.caDir = filepath.Join(b.dir, "capsem-ca")
	b.capsemCA = filepath.Join(b.caDir, "ca.pem")
	if b.upstream, err = upstream.Start(exec.Command(b.exe, "upstream", "-cert", certPath, "-key", keyPath)); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bench) close() {
	if b.env != nil {
		b.env.Stop()
		b.env = nil
	}
	if b.upstream != nil {
		b.upstream.Stop()
		b.upstream = nil
	}
	os.RemoveAll(b.dir)
}
