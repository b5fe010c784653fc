package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/capsem/capsem/bench/internal/guestns"
	"github.com/capsem/capsem/bench/internal/listflag"
	"github.com/capsem/capsem/bench/internal/peerbin"
	"github.com/capsem/capsem/bench/internal/upstream"
	"github.com/capsem/capsem/tests/harness"
)

var (
	flagReps      = flag.Int("reps", 3, "repetitions of every measurement, each with a fresh capsem-net and namespace (the median is reported)")
	flagBytes     = flag.Int64("bytes", 1<<30, "size of the download and of the upload")
	flagDuration  = flag.Duration("t", 5*time.Second, "duration of each requests/s run")
	flagLatDur    = flag.Duration("lat-t", 3*time.Second, "duration of each latency run (concurrency 1)")
	flagConns     = flag.String("conns", "16", "concurrent keep-alive requests in the requests/s runs (HTTP/1.1: connections); a comma-separated list measures each")
	flagH2Conns   = flag.Int("h2-conns", 1, "HTTP/2 connections the concurrent requests share")
	flagMTU       = flag.Int("mtu", 1500, "guest link MTU")
	flagDLProtos  = flag.String("dl-protos", "h1,h2", "protocols of the download and upload runs: any of h1,h2")
	flagULBody    = flag.String("ul-body", "bytes", "what the upload sends: bytes (what the download receives: every byte value in turn) or text (JSON lines of English words, like an agent's prompts)")
	flagRPSProtos = flag.String("rps-protos", "h1,h2,h1-new", "protocols of the requests/s runs: any of h1,h2,h1-new (HTTP/1.1, a new TCP connection and TLS handshake per request, like curl in a loop)")
	flagPaths     = flag.String("paths", "direct,pass,mitm,mitmproxy", "paths to measure: direct (host to upstream), pass (guest, passthrough), mitm (guest, intercepted; no secret, DLP off), mitm-secrets (guest, intercepted by a capsem-net with two secrets and DLP log), mitmproxy (a namespace routed through mitmdump in transparent mode; skipped when mitmdump or nft is missing)")
	flagSkip      = flag.String("skip", "", "measurements to skip: any of dl,ul,rps,lat,h3 (-skip dl,ul,rps,lat runs the HTTP/3 comparison alone)")
	flagH3Paths   = flag.String("h3-paths", "direct,mitm,mitm-h2up", "paths of the HTTP/3 comparison (HTTP/3 beside HTTP/2, the same Go client): direct (host to upstream), mitm (its upstream serves HTTP/3 too), mitm-h2up (an upstream without HTTP/3: the MITM forwards HTTP/3 over HTTP/2)")
	flagH3Bytes   = flag.Int64("h3-bytes", 1<<30, "size of the HTTP/3 comparison's download")
	flagH3Streams = flag.Int("h3-streams", 16, "concurrent requests on the one connection of the HTTP/3 comparison's requests/s runs")
	flagRTT       = flag.Duration("upstream-rtt", 0, "put the upstream this round trip away from every path (a relay that holds each chunk half of it each way): a remote API's distance, which a client opening a connection per request pays in handshakes")
	flagProfile   = flag.String("profile", "", "write a capsem-net CPU profile per repetition into DIR")
	flagVerbose   = flag.Bool("v", false, "print capsem-net's output when it stops")
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "loadgen":
			loadgenMain(os.Args[2:])
			return
		case "upstream":
			upstreamMain(os.Args[2:])
			return
		case "fetch":
			fetchMain(os.Args[2:])
			return
		}
	}
	flag.Parse()
	if why := harness.Requirements("curl"); why != "" {
		fmt.Fprintln(os.Stderr, "mitmbench:", why)
		os.Exit(2)
	}
	checkMitmproxy()
	b, err := setup()
	if err != nil {
		fatal(err)
	}
	defer b.close()
	// An interrupted run removes its namespaces, veth pair and nft table
	// too: Go's default on SIGINT is to exit at once.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		fmt.Fprintf(os.Stderr, "mitmbench: %v: cleaning up\n", <-sig)
		b.close()
		os.Exit(1)
	}()
	start := time.Now()
	for rep := 1; rep <= *flagReps; rep++ {
		if err := b.rep(rep); err != nil {
			b.close()
			fatal(fmt.Errorf("repetition %d: %w", rep, err))
		}
	}
	fmt.Fprintf(os.Stderr, "mitmbench: %d repetitions in %s\n", *flagReps, time.Since(start).Round(time.Second))
	b.print(os.Stdout)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mitmbench:", err)
	os.Exit(1)
}

// bench is the state shared by every repetition.
type bench struct {
	dir        string
	exe        string // this program, re-executed as loadgen
	capsemNet  string
	upstreamCA string
	capsemCA   string // <ca-dir>/ca.pem, the CA the intercepted guest trusts
	caDir      string
	upstream   *upstream.Process
	upPort     int         // where the paths reach the upstream: its port, or the delay relay's (-upstream-rtt)
	relay      *delayRelay // nil without -upstream-rtt
	// upstreamH2 serves h2up.test: HTTPS over TCP alone, for the mitm-h2up
	// path of the HTTP/3 comparison; nil when that is not measured.
	upstreamH2 *upstream.Process

	env     *guestns.Env   // the current repetition's guest
	senv    *guestns.Env   // the current repetition's guest of the mitm-secrets path, or nil
	mp      *mitmproxyPeer // the current repetition's mitmdump and its client, or nil
	tokens  tokens
	ulFile  string // the upload's body, -bytes long
	closeMu sync.Mutex
	samples map[string][]sample
	order   []string // keys of samples, in the order first measured
}

// sample is one measurement: its value(s) and the CPU it took.
type sample struct {
	v   float64 // Gbit/s, requests/s or p50 µs
	p99 float64 // latency runs: p99 µs
	cpu cpuUse
}

func setup() (*bench, error) {
	b := &bench{samples: map[string][]sample{}}
	var err error
	if b.dir, err = os.MkdirTemp("", "mitmbench"); err != nil {
		return nil, err
	}
	if b.exe, err = os.Executable(); err != nil {
		return nil, err
	}
	b.capsemNet = filepath.Join(b.dir, "capsem-net")
	fmt.Fprintln(os.Stderr, "mitmbench: building capsem-net")
	if err := peerbin.BuildCapsemNet(b.capsemNet); err != nil {
		return nil, err
	}
	caPath, certPath, keyPath, err := upstream.WritePKI(b.dir, upstreamNames...)
	if err != nil {
		return nil, err
	}
	b.upstreamCA = caPath
	b.caDir = filepath.Join(b.dir, "capsem-ca")
	b.capsemCA = filepath.Join(b.caDir, "ca.pem")
	if b.tokens, err = writeTokens(b.dir); err != nil {
		return nil, err
	}
	if !listflag.Has(*flagSkip, "ul") {
		b.ulFile = filepath.Join(b.dir, "upload.bin")
		if err := writeUploadBody(b.ulFile, *flagBytes, *flagULBody); err != nil {
			return nil, err
		}
	}
	args := []string{"upstream", "-cert", certPath, "-key", keyPath,
		"-auth", "Bearer " + b.tokens.real, "-auth", "Bearer " + b.tokens.plain}
	h3 := !listflag.Has(*flagSkip, "h3")
	if h3 {
		for _, where := range listflag.Split(*flagH3Paths) {
			if _, ok := pathNames[where]; !ok || where == "pass" || where == "mitm-secrets" || where == "mitmproxy" {
				return nil, fmt.Errorf("-h3-paths: %q is not one of direct, mitm, mitm-h2up (mitmproxy has no HTTP/3)", where)
			}
		}
		if listflag.Has(*flagH3Paths, "mitm-h2up") {
			if b.upstreamH2, err = upstream.Start(exec.Command(b.exe, args...)); err != nil {
				return nil, err
			}
		}
		// The TCP rows are unchanged by it: the MITM forwards over
		// HTTP/3 only a guest's HTTP/3 requests.
		args = append(args, "-h3")
	}
	if b.upstream, err = upstream.Start(exec.Command(b.exe, args...)); err != nil {
		b.close()
		return nil, err
	}
	b.upPort = b.upstream.Port
	if *flagRTT > 0 {
		if b.relay, err = startDelayRelay(fmt.Sprintf("127.0.0.1:%d", b.upstream.Port), *flagRTT); err != nil {
			b.close()
			return nil, err
		}
		b.upPort = b.relay.port()
	}
	return b, nil
}

func (b *bench) close() {
	// A signal's cleanup and a failed repetition's may both run: the
	// second waits for the first, so that neither exits halfway.
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	b.stopEnvs()
	if b.relay != nil {
		b.relay.close()
	}
	for _, u := range []**upstream.Process{&b.upstream, &b.upstreamH2} {
		if *u != nil {
			(*u).Stop()
			*u = nil
		}
	}
	os.RemoveAll(b.dir)
}
