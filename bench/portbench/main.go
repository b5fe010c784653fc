package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsem/capsem/bench/internal/listflag"

	"github.com/capsem/capsem/bench/internal/peerbin"
	"github.com/capsem/capsem/bench/internal/stats"
	"github.com/capsem/capsem/tests/harness"
)

var (
	flagDuration = flag.Duration("t", 5*time.Second, "duration of each iperf3 run and each requests/s run")
	flagReps     = flag.Int("reps", 3, "repetitions of each measurement, each with a fresh peer and namespace (the median is reported)")
	flagPeers    = flag.String("peers", "capsem-net,gvproxy,passt", "peers to measure, comma separated")
	flagCache    = flag.String("cache", ".cache/bin", "where built peer binaries are kept")
	flagWorkers  = flag.Int("c", 8, "concurrent keep-alive connections of the requests/s run")
	flagLatency  = flag.Int("n", 500, "sequential requests of the latency run")
	flagProfile  = flag.String("capsem-profile", "", "write capsem-net's CPU profile to DIR/capsem-net-ports.pprof (of the last repetition)")
	flagSkip     = flag.String("skip", "", "measurements to skip: any of iperf,reqs,latency")
	flagServe    = flag.String("serve", "", "internal: serve the benchmark's HTTP server on ADDR (run in the guest namespace)")
)

// The guest's servers, on these ports inside its namespace.
const (
	guestIperf = 5201
	guestHTTP  = 8000
)

// body is what the guest's HTTP server answers: small, so that requests/s
// measures the path, not the copy.
var body = []byte("capsem portbench\n")

func main() {
	flag.Parse()
	if *flagServe != "" {
		serveHTTP(*flagServe)
		return
	}
	if why := harness.Requirements("iperf3"); why != "" {
		fmt.Fprintln(os.Stderr, "portbench:", why)
		os.Exit(2)
	}
	cache, _ := filepath.Abs(*flagCache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}

	// The baseline: the same servers on the host's loopback, reached
	// directly.
	base, err := direct(self)
	if err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "%-10s host→guest %6.2f Gbit/s  guest→host %6.2f Gbit/s  %7.0f req/s  p50 %6.0f µs\n", "direct", base.upGbps, base.downGbps, base.reqs, base.p50us)

	var results []result
	for _, name := range strings.Split(*flagPeers, ",") {
		p, err := makePeer(strings.TrimSpace(name), cache)
		if err != nil {
			fmt.Fprintf(os.Stderr, "portbench: %s unavailable: %v\n", name, err)
			continue
		}
		r := measureReps(p, self)
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "portbench: %s: %v\n", p.name, r.err)
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "%-10s host→guest %6.2f Gbit/s  guest→host %6.2f Gbit/s  %7.0f req/s  p50 %6.0f µs\n", r.peer, r.upGbps, r.downGbps, r.reqs, r.p50us)
	}
	printTable(base, results)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "portbench:", err)
	os.Exit(1)
}

// serveHTTP is the guest's HTTP/1.1 server (keep-alive).
func serveHTTP(addr string) {
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fatal(err)
	}
}

// peer is one stack publishing the guest's ports on the host.
type peer struct {
	name string
	// start launches the peer on the guest socket sock and publishes the
	// guest's iperf3 and HTTP ports on host ports iperfPort and httpPort
	// (after expose, which runs once the guest has its lease).
	start    func(dir, sock string, iperfPort, httpPort int) (expose func() error, stop func(), err error)
	guestMAC string
}

type result struct {
	peer                   string
	upGbps, downGbps, reqs float64
	p50us                  float64
	err                    error
}

func makePeer(name, cache string) (peer, error) {
	switch name {
	case "capsem-net":
		bin := filepath.Join(cache, "capsem-net")
		if err := peerbin.BuildCapsemNet(bin); err != nil {
			return peer{}, err
		}
		return peer{name: name, start: func(dir, sock string, iperfPort, httpPort int) (func() error, func(), error) {
			svc := filepath.Join(dir, "services.sock")
			args := []string{"--data", filepath.Join(dir, "data"), "--ca-dir", filepath.Join(dir, "ca"),
				"--listen-qemu", "unix://" + sock, "--log-level", "warn", "--services", "unix://" + svc}
			if *flagProfile != "" {
				p, _ := filepath.Abs(filepath.Join(*flagProfile, "capsem-net-ports.pprof"))
				args = append(args, "--cpu-profile", p)
			}
			stop, err := peerbin.Start(bin, args...)
			return func() error { return exposeBoth(svc, "198.18.0.2", iperfPort, httpPort) }, stop, err
		}}, nil
	case "gvproxy":
		bin, err := peerbin.Gvproxy(cache)
		if err != nil {
			return peer{}, err
		}
		return peer{name: name, guestMAC: peerbin.GvproxyGuestMAC, start: func(dir, sock string, iperfPort, httpPort int) (func() error, func(), error) {
			svc := filepath.Join(dir, "services.sock")
			stop, err := peerbin.Start(bin, "-listen-qemu", "unix://"+sock, "-ssh-port", "-1", "-services", "unix://"+svc)
			return func() error { return exposeBoth(svc, "192.168.127.2", iperfPort, httpPort) }, stop, err
		}}, nil
	case "passt":
		bin, err := peerbin.Passt()
		if err != nil {
			return peer{}, err
		}
		return peer{name: name, start: func(dir, sock string, iperfPort, httpPort int) (func() error, func(), error) {
			// passt drops root for "nobody", which must be able to create
			// the socket in dir.
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, nil, err
			}
			stop, err := peerbin.Start(bin, "-f", "-q", "-s", sock, "-4", "-u", "none",
				"-t", fmt.Sprintf("%d:%d,%d:%d", iperfPort, guestIperf, httpPort, guestHTTP))
			return func() error { return nil }, stop, err
		}}, nil
	}
	return peer{}, fmt.Errorf("unknown peer %q", name)
}

// exposeBoth publishes the guest's two ports through gvproxy's services
// API (capsem-net serves the same one), as podman does.
func exposeBoth(svc, guestIP string, iperfPort, httpPort int) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", svc)
	}}, Timeout: 10 * time.Second}
	for _, p := range [][2]int{{iperfPort, guestIperf}, {httpPort, guestHTTP}} {
		req, _ := json.Marshal(map[string]string{"local": fmt.Sprintf("127.0.0.1:%d", p[0]), "remote": fmt.Sprintf("%s:%d", guestIP, p[1]), "protocol": "tcp"})
		var resp *http.Response
		var err error
		for i := 0; i < 50; i++ { // the services socket appears a moment after start
			if resp, err = hc.Post("http://services/services/forwarder/expose", "application/json", bytes.NewReader(req)); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("expose: %w", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("expose %s: %s: %s", req, resp.Status, b)
		}
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// direct measures the same servers on the host's loopback.
func direct(self string) (result, error) {
	ps, err := freePorts(2)
	if err != nil {
		return result{}, err
	}
	stopIperf, err := startServer(exec.Command("iperf3", "-s", "-B", "127.0.0.1", "-p", strconv.Itoa(ps[0])), ps[0])
	if err != nil {
		return result{}, err
	}
	defer stopIperf()
	stopHTTP, err := startServer(exec.Command(self, "-serve", fmt.Sprintf("127.0.0.1:%d", ps[1])), ps[1])
	if err != nil {
		return result{}, err
	}
	defer stopHTTP()
	return measureHost(ps[0], ps[1])
}

// startServer starts cmd and waits until 127.0.0.1:port accepts.
func startServer(cmd *exec.Cmd, port int) (func(), error) {
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	if err := waitAccept(port, 10*time.Second); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func waitAccept(port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("127.0.0.1:%d does not accept: %w", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measure runs one repetition: a fresh peer, a fresh namespace with the
// two servers in it, the ports published, then the host's clients.
func measure(p peer, self string) (r result) {
	r.peer = p.name
	dir, err := os.MkdirTemp("", "portbench")
	if err != nil {
		r.err = err
		return
	}
	defer os.RemoveAll(dir)
	ps, err := freePorts(2)
	if err != nil {
		r.err = err
		return
	}
	sock := filepath.Join(dir, "net.sock")
	expose, stop, err := p.start(dir, sock, ps[0], ps[1])
	if err != nil {
		r.err = err
		return
	}
	defer stop()
	g, err := peerbin.AttachGuest(sock, 1500, p.guestMAC)
	if err != nil {
		r.err = err
		return
	}
	defer g.Close()
	ns := g.NS
	ctx, cancel := context.WithCancel(context.Background())
	var servers []*exec.Cmd
	defer func() {
		cancel()
		for _, cmd := range servers {
			_ = cmd.Wait()
		}
	}()
	for _, cmd := range []*exec.Cmd{
		ns.Command(ctx, "iperf3", "-s", "-p", strconv.Itoa(guestIperf)),
		ns.Command(ctx, self, "-serve", fmt.Sprintf("0.0.0.0:%d", guestHTTP)),
	} {
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			r.err = err
			return
		}
		servers = append(servers, cmd)
	}
	if err := expose(); err != nil {
		r.err = err
		return
	}
	// The guest's servers answer through the published port.
	if err := waitHTTP(ps[1], 20*time.Second); err != nil {
		r.err = err
		return
	}
	m, err := measureHost(ps[0], ps[1])
	m.peer = p.name
	if err != nil {
		m.err = err
	}
	return m
}

func waitHTTP(port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest's HTTP server through 127.0.0.1:%d: %w", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// measureHost runs the host's clients against 127.0.0.1:iperfPort and
// httpPort: iperf3 both ways, requests/s, then the latency run.
func measureHost(iperfPort, httpPort int) (result, error) {
	var r result
	var err error
	if !skip("iperf") {
		if r.upGbps, err = iperf(iperfPort, false); err != nil {
			return r, err
		}
		if r.downGbps, err = iperf(iperfPort, true); err != nil {
			return r, err
		}
	}
	if !skip("reqs") {
		if r.reqs, err = reqsPerSec(httpPort); err != nil {
			return r, err
		}
	}
	if !skip("latency") {
		r.p50us, err = latencyP50(httpPort)
	}
	return r, err
}

func skip(what string) bool { return listflag.Has(*flagSkip, what) }

// iperf is iperf3's rate from the host's client to the server behind
// port (reverse: from the server).
func iperf(port int, reverse bool) (float64, error) {
	args := []string{"-c", "127.0.0.1", "-p", strconv.Itoa(port), "-t", strconv.Itoa(int(flagDuration.Seconds())), "-J"}
	if reverse {
		args = append(args, "-R")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *flagDuration+30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "iperf3", args...).Output()
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("iperf3 %v: %v: %.300s", args, err, out)
	}
	if res.Error != "" {
		return 0, errors.New("iperf3: " + res.Error)
	}
	return res.End.SumReceived.BitsPerSecond / 1e9, nil
}

func client() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *flagWorkers, DisableCompression: true}, Timeout: 10 * time.Second}
}

// get does one request and reads the whole answer.
func get(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New(resp.Status)
	}
	return err
}

// reqsPerSec is HTTP/1.1 requests a second over -c keep-alive connections.
func reqsPerSec(port int) (float64, error) {
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	c := client()
	defer c.CloseIdleConnections()
	var n atomic.Int64
	var firstErr error
	var once sync.Once
	end := time.Now().Add(*flagDuration)
	var wg sync.WaitGroup
	for i := 0; i < *flagWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if err := get(c, url); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("requests/s: %w", firstErr)
	}
	return float64(n.Load()) / flagDuration.Seconds(), nil
}

// latencyP50 is the median time of -n sequential requests on one
// keep-alive connection, in µs.
func latencyP50(port int) (float64, error) {
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	c := client()
	defer c.CloseIdleConnections()
	if err := get(c, url); err != nil { // the connection is made before timing
		return 0, err
	}
	ds := make([]float64, 0, *flagLatency)
	for i := 0; i < *flagLatency; i++ {
		t0 := time.Now()
		if err := get(c, url); err != nil {
			return 0, fmt.Errorf("latency: %w", err)
		}
		ds = append(ds, float64(time.Since(t0).Microseconds()))
	}
	sort.Float64s(ds)
	return ds[len(ds)/2], nil
}

// measureReps repeats measure with a fresh peer and namespace each time,
// and reports the median of each figure.
func measureReps(p peer, self string) result {
	var ups, downs, reqs, p50s []float64
	for i := 0; i < *flagReps; i++ {
		r := measure(p, self)
		if r.err != nil {
			return r
		}
		ups, downs, reqs, p50s = append(ups, r.upGbps), append(downs, r.downGbps), append(reqs, r.reqs), append(p50s, r.p50us)
	}
	return result{peer: p.name, upGbps: stats.Median(ups), downGbps: stats.Median(downs), reqs: stats.Median(reqs), p50us: stats.Median(p50s)}
}

func printTable(base result, results []result) {
	var gv *result
	for i := range results {
		if results[i].peer == "gvproxy" && results[i].err == nil {
			gv = &results[i]
		}
	}
	fmt.Printf("| path | host→guest Gbit/s | guest→host Gbit/s | HTTP/1.1 req/s (%d conns) | p50 request µs | added p50 over direct | vs gvproxy (host→guest / guest→host / req/s) |\n", *flagWorkers)
	fmt.Printf("|---|---:|---:|---:|---:|---:|---|\n")
	fmt.Printf("| direct (host loopback) | %.2f | %.2f | %.0f | %.0f | | |\n", base.upGbps, base.downGbps, base.reqs, base.p50us)
	for _, r := range results {
		if r.err != nil {
			fmt.Printf("| %s | failed: %s | | | | | |\n", r.peer, strings.ReplaceAll(r.err.Error(), "\n", " "))
			continue
		}
		ratio := ""
		if gv != nil {
			ratio = strings.Join([]string{times(r.upGbps, gv.upGbps), times(r.downGbps, gv.downGbps), times(r.reqs, gv.reqs)}, " / ")
		}
		fmt.Printf("| %s | %.2f | %.2f | %.0f | %.0f | +%.0f µs | %s |\n", r.peer, r.upGbps, r.downGbps, r.reqs, r.p50us, r.p50us-base.p50us, ratio)
	}
}

// times is a/b as "1.23×", or "–" when either was not measured.
func times(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
