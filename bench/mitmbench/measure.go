package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capsem/capsem/bench/internal/cpu"
	"github.com/capsem/capsem/bench/internal/guestns"
	"github.com/capsem/capsem/bench/internal/listflag"
	"github.com/capsem/capsem/bench/internal/upstream"
)

// rep runs every measurement once, with a fresh capsem-net and namespace.
// The paths alternate within each measurement, so that drift over the run
// hits all of them alike.
// The mitm-secrets path has a capsem-net and namespace of its own (its
// policy differs), started alongside the other paths' and idle while they
// are measured.
func (b *bench) rep(rep int) error {
	defer b.stopEnvs()
	var err error
	if b.env, err = b.startEnv(rep, false); err != nil {
		return err
	}
	paths := listflag.Split(*flagPaths)
	if slices.Contains(paths, "mitm-secrets") {
		if b.senv, err = b.startEnv(rep, true); err != nil {
			return err
		}
	}
	if slices.Contains(paths, "mitmproxy") {
		if b.mp, err = startMitmproxy(filepath.Join(b.dir, "mitmproxy-conf"), b.upPort, b.upstreamCA); err != nil {
			return err
		}
	}
	for _, where := range paths {
		if _, ok := pathNames[where]; !ok {
			return fmt.Errorf("-paths: unknown path %q", where)
		}
	}
	for _, m := range []struct{ key, name string }{{"dl", "download"}, {"ul", "upload  "}} {
		if listflag.Has(*flagSkip, m.key) {
			continue
		}
		for _, proto := range listflag.Split(*flagDLProtos) {
			for _, where := range paths {
				s, err := b.retry(func() (sample, error) { return b.transfer(m.key, where, proto) })
				if err != nil {
					return err
				}
				b.add(m.key+"/"+proto+"/"+where, s)
				fmt.Fprintf(os.Stderr, "rep %d  %s %s %-12s %6.2f Gbit/s  %s\n", rep, m.name, proto, where, s.v, s.cpu)
			}
		}
	}
	if !listflag.Has(*flagSkip, "rps") {
		for _, conns := range connsList() {
			for _, proto := range listflag.Split(*flagRPSProtos) {
				for _, where := range paths {
					s, err := b.retry(func() (sample, error) { return b.load(where, proto, conns, *flagH2Conns, *flagDuration, false) })
					if err != nil {
						return err
					}
					b.add(rpsKey(proto, conns)+where, s)
					fmt.Fprintf(os.Stderr, "rep %d  req/s    %s c%-3d %-12s %8.0f  %s\n", rep, proto, conns, where, s.v, s.cpu)
				}
			}
		}
	}
	if !listflag.Has(*flagSkip, "lat") {
		for _, where := range paths {
			s, err := b.retry(func() (sample, error) { return b.load(where, "h1", 1, 1, *flagLatDur, true) })
			if err != nil {
				return err
			}
			b.add("lat/h1/"+where, s)
			fmt.Fprintf(os.Stderr, "rep %d  latency  h1 %-12s p50 %6.0f µs  p99 %6.0f µs  %s\n", rep, where, s.v, s.p99, s.cpu)
		}
	}
	if !listflag.Has(*flagSkip, "h3") {
		return b.h3Rep(rep)
	}
	return nil
}

// waitQuiet waits (up to a minute) until the machine is idle: the figures
// are CPU-bound, and anything else running on the two cores shows up in
// them. It returns the background load it last saw, in cores.
func waitQuiet() float64 {
	var load float64
	for deadline := time.Now().Add(time.Minute); ; {
		j0 := cpu.Machine()
		time.Sleep(500 * time.Millisecond)
		j1 := cpu.Machine()
		load = cpu.Cores(j1.Busy-j0.Busy, j0.Total, j1.Total)
		if load < 0.15 || time.Now().After(deadline) {
			break
		}
		if !quietWarned {
			fmt.Fprintf(os.Stderr, "mitmbench: the machine is busy (%.2f cores) with something else; waiting for it to be idle\n", load)
			quietWarned = true
		}
	}
	if load > maxBackground {
		maxBackground = load
	}
	return load
}

var (
	quietWarned   bool
	maxBackground float64 // the most background load a measurement started with
)

// maxOther is how much CPU other processes may take during a measurement
// before it is taken again.
const maxOther = 0.25

// retry takes a measurement again (up to three more times) when other
// processes took more than maxOther cores during it.
func (b *bench) retry(f func() (sample, error)) (sample, error) {
	for attempt := 1; ; attempt++ {
		waitQuiet()
		s, err := f()
		if err != nil || s.cpu.other <= maxOther || attempt == 4 {
			if err == nil && s.cpu.other > maxOther {
				interfered++
			}
			return s, err
		}
		retried++
		fmt.Fprintf(os.Stderr, "mitmbench: other processes took %.2f cores during the run; measuring again\n", s.cpu.other)
	}
}

var retried, interfered int

func (b *bench) add(key string, s sample) {
	if _, ok := b.samples[key]; !ok {
		b.order = append(b.order, key)
	}
	b.samples[key] = append(b.samples[key], s)
}

// rpsKey is the key prefix of a requests/s measurement.
func rpsKey(proto string, conns int) string { return fmt.Sprintf("rps/%s/%d/", proto, conns) }

func connsList() []int {
	var out []int
	for _, s := range listflag.Split(*flagConns) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-conns %q: want positive numbers", *flagConns))
		}
		out = append(out, n)
	}
	return out
}

// pathNames are the paths -paths accepts, with their report headings.
var pathNames = map[string]string{
	"direct":       "direct (host → upstream)",
	"pass":         "passthrough (TCP forwarding)",
	"mitm":         "MITM",
	"mitm-secrets": "MITM, 2 secrets + DLP log",
	"mitm-h2up":    "MITM, upstream without HTTP/3",
	"mitmproxy":    "mitmproxy (transparent)",
}

// target is where a path's client connects and what it trusts.
func (b *bench) target(where string) (addr, sni, ca string, inGuest bool) {
	switch where {
	case "mitm", "mitm-secrets":
		return "mitm.test:443", "mitm.test", b.capsemCA, true
	case "mitm-h2up":
		return "h2up.test:443", "h2up.test", b.capsemCA, true
	case "pass":
		return "pass.test:443", "pass.test", b.upstreamCA, true
	case "mitmproxy":
		return mpHostAddr + ":443", "mitm.test", b.mp.ca, true
	default: // direct: the host to the upstream's loopback port
		return "127.0.0.1:" + strconv.Itoa(b.upPort), "mitm.test", b.upstreamCA, false
	}
}

// envFor is the guest (capsem-net and namespace) of a path; direct has
// none of its own and is given the other paths'.
func (b *bench) envFor(where string) *guestns.Env {
	if where == "mitm-secrets" {
		return b.senv
	}
	return b.env
}

// upstreamFor is the upstream a path reaches.
func (b *bench) upstreamFor(where string) *upstream.Process {
	if where == "mitm-h2up" {
		return b.upstreamH2
	}
	return b.upstream
}

// proxyPID is the process id of a path's proxy: mitmdump on the
// mitmproxy path, else capsem-net (direct: the other paths', idle).
func (b *bench) proxyPID(where string) int {
	if where == "mitmproxy" {
		return b.mp.PID()
	}
	if e := b.envFor(where); e != nil {
		return e.PID()
	}
	return 0
}

func (b *bench) command(ctx context.Context, where string, name string, args ...string) *exec.Cmd {
	if where == "mitmproxy" {
		return b.mp.Command(ctx, name, args...)
	}
	if _, _, _, inGuest := b.target(where); inGuest {
		return b.envFor(where).NS.Command(ctx, name, args...)
	}
	return exec.CommandContext(ctx, name, args...)
}

// transfer downloads (dl) or uploads (ul) -bytes with curl and returns
// Gbit/s = size / curl's time_total. The upload POSTs the file written by
// setup (-ul-body) to /upload, which answers how many bytes it read.
func (b *bench) transfer(kind, where, proto string) (sample, error) {
	addr, sni, ca, _ := b.target(where)
	path := fmt.Sprintf("/bytes?n=%d", *flagBytes)
	// Fields: bytes moved, seconds, HTTP version, status; curl prints them
	// after the body (the upload's answer, the download goes to
	// /dev/null).
	args := []string{"-sS", "--max-time", "600", "--cacert", ca,
		"-H", "Authorization: " + b.authFor(where)}
	if kind == "ul" {
		path = "/upload"
		// -T streams the file (--data-binary would read it into memory
		// first); "Expect:" drops curl's wait for a 100 Continue, which
		// would add a round trip (or curl's one-second timeout) to the
		// measured time.
		args = append(args, "-T", b.ulFile, "-X", "POST", "-H", "Expect:", "-H", "Content-Type: application/octet-stream",
			"-w", "\n%{size_upload} %{time_total} %{http_version} %{http_code}")
	} else {
		args = append(args, "-o", "/dev/null", "-w", "\n%{size_download} %{time_total} %{http_version} %{http_code}")
	}
	url := "https://" + sni + path
	if host, port, _ := net.SplitHostPort(addr); net.ParseIP(host) != nil {
		// direct and mitmproxy: the client dials an address (the guests
		// of capsem-net resolve names through it).
		url = fmt.Sprintf("https://%s:%s%s", sni, port, path)
		args = append(args, "--resolve", fmt.Sprintf("%s:%s:%s", sni, port, host))
	}
	want := "1.1"
	switch proto {
	case "h1":
		args = append(args, "--http1.1")
	case "h2":
		args = append(args, "--http2")
		want = "2"
	default:
		return sample{}, fmt.Errorf("unknown download/upload protocol %q", proto)
	}
	args = append(args, url)
	var out bytes.Buffer
	cmd := b.command(context.Background(), where, "curl", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	var s sample
	cpu, err := b.measureCPU(cmd, b.proxyPID(where), b.upstreamFor(where))
	if err != nil {
		return s, fmt.Errorf("curl %s: %v: %s", strings.Join(args, " "), err, out.String())
	}
	body, tail, _ := strings.Cut(out.String(), "\n")
	f := strings.Fields(tail)
	if len(f) != 4 {
		return s, fmt.Errorf("curl output %q", out.String())
	}
	size, _ := strconv.ParseFloat(f[0], 64)
	secs, _ := strconv.ParseFloat(f[1], 64)
	if f[3] != "200" {
		return s, fmt.Errorf("curl %s: status %s: %s", url, f[3], body)
	}
	if int64(size) != *flagBytes || secs <= 0 {
		return s, fmt.Errorf("curl %s: moved %s bytes in %s s", url, f[0], f[1])
	}
	if kind == "ul" && body != strconv.FormatInt(*flagBytes, 10) {
		return s, fmt.Errorf("curl %s: the upstream read %q bytes of %d", url, body, *flagBytes)
	}
	if f[2] != want {
		return s, fmt.Errorf("curl %s: spoke HTTP/%s, want HTTP/%s", url, f[2], want)
	}
	s.v, s.cpu = size*8/secs/1e9, cpu
	return s, nil
}

// load runs the loadgen sub-mode: in the guest for pass, mitm and
// mitm-secrets, on the host for direct.
func (b *bench) load(where, proto string, conns, h2conns int, d time.Duration, latency bool) (sample, error) {
	addr, sni, ca, _ := b.target(where)
	args := []string{"loadgen", "-addr", addr, "-sni", sni, "-ca", ca, "-proto", proto, "-auth", b.authFor(where),
		"-conns", strconv.Itoa(conns), "-h2-conns", strconv.Itoa(h2conns), "-t", d.String()}
	var s sample
	var r loadResult
	cpu, _, err := b.runSub(where, d+time.Minute, args, &r)
	if err != nil {
		return s, err
	}
	if r.Errors > 0 {
		return s, fmt.Errorf("loadgen %s %s: %d errors, first: %s", where, proto, r.Errors, r.Err)
	}
	s.cpu = cpu
	if latency {
		s.v, s.p99 = r.P50us, r.P99us
	} else {
		s.v = r.RPS
	}
	return s, nil
}

// runSub runs a sub-mode of this program (args[0]: loadgen, fetch) where
// the path's client runs, within timeout, measuring every party's CPU, and
// decodes the JSON it prints into res. It returns what the sub-mode wrote
// to stderr too.
func (b *bench) runSub(where string, timeout time.Duration, args []string, res any) (cpuUse, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := b.command(ctx, where, b.exe, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cpu, err := b.measureCPU(cmd, b.proxyPID(where), b.upstreamFor(where))
	if err != nil {
		return cpu, "", fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), res); err != nil {
		return cpu, "", fmt.Errorf("%s output %q: %v", args[0], out.String(), err)
	}
	return cpu, errOut.String(), nil
}
