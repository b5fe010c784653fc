package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capsem/capsem/tests/harness"
)

var (
	flagReps      = flag.Int("reps", 3, "repetitions of every measurement, each with a fresh capsem-net and namespace (the median is reported)")
	flagBytes     = flag.Int64("bytes", 1<<30, "size of the download")
	flagDuration  = flag.Duration("t", 5*time.Second, "duration of each requests/s run")
	flagLatDur    = flag.Duration("lat-t", 3*time.Second, "duration of each latency run (concurrency 1)")
	flagConns     = flag.String("conns", "16", "concurrent keep-alive requests in the requests/s runs (HTTP/1.1: connections); a comma-separated list measures each")
	flagH2Conns   = flag.Int("h2-conns", 1, "HTTP/2 connections the concurrent requests share")
	flagMTU       = flag.Int("mtu", 1500, "guest link MTU")
	flagDLProtos  = flag.String("dl-protos", "h1,h2", "protocols of the download runs: any of h1,h2")
	flagRPSProtos = flag.String("rps-protos", "h1,h2", "protocols of the requests/s runs: any of h1,h2")
	flagPaths     = flag.String("paths", "direct,pass,mitm", "paths to measure: direct (host to upstream), pass (guest, passthrough), mitm (guest, intercepted)")
	flagSkip      = flag.String("skip", "", "measurements to skip: any of dl,rps,lat")
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
		}
	}
	flag.Parse()
	if why := harness.Requirements("curl"); why != "" {
		fmt.Fprintln(os.Stderr, "mitmbench:", why)
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
	fmt.Fprintf(os.Stderr, "mitmbench: %d repetitions in %s\n", *flagReps, time.Since(start).Round(time.Second))
	b.print(os.Stdout)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mitmbench:", err)
	os.Exit(1)
}

// bench is the state shared by every repetition.
type bench struct {
	dir          string
	exe          string // this program, re-executed as loadgen
	capsemNet    string
	upstreamCA   string
	capsemCA     string // <ca-dir>/ca.pem, the CA the intercepted guest trusts
	caDir        string
	upstreamPort int
	upstream     *exec.Cmd
	upstreamIn   io.WriteCloser

	env     *env // the current repetition's guest
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
	if out, err := exec.Command("go", "build", "-o", b.capsemNet, "./cmd/capsem-net").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/capsem-net (run from the repository root): %v: %s", err, out)
	}
	caPath, certPath, keyPath, err := writeUpstreamPKI(b.dir)
	if err != nil {
		return nil, err
	}
	b.upstreamCA = caPath
	b.caDir = filepath.Join(b.dir, "capsem-ca")
	b.capsemCA = filepath.Join(b.caDir, "ca.pem")
	b.upstream = exec.Command(b.exe, "upstream", "-cert", certPath, "-key", keyPath)
	b.upstream.Stderr = os.Stderr
	if b.upstreamIn, err = b.upstream.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := b.upstream.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.upstream.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("upstream did not start: %w", err)
	}
	if b.upstreamPort, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		return nil, fmt.Errorf("upstream port %q: %w", line, err)
	}
	return b, nil
}

func (b *bench) close() {
	if b.env != nil {
		b.env.stop()
		b.env = nil
	}
	if b.upstream != nil && b.upstream.Process != nil {
		b.upstreamIn.Close()
		b.upstream.Wait()
		b.upstream = nil
	}
	os.RemoveAll(b.dir)
}

// env is one guest namespace wired to one capsem-net process.
type env struct {
	cmd  *exec.Cmd
	out  *harness.SyncBuffer
	ns   *harness.Namespace
	pump *harness.Pump
	dir  string
}

const policyTemplate = `[network]
default = "deny"
allow = ["mitm.test:443", "pass.test:443"]

[upstream]
resolve = { "mitm.test" = "127.0.0.1:%[1]d", "pass.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[tls]
passthrough = ["pass.test"]
`

func (b *bench) startEnv(rep int) (*env, error) {
	e := &env{out: &harness.SyncBuffer{}, dir: filepath.Join(b.dir, fmt.Sprintf("rep%d", rep))}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}
	pf := filepath.Join(e.dir, "policy.toml")
	if err := os.WriteFile(pf, []byte(fmt.Sprintf(policyTemplate, b.upstreamPort, b.upstreamCA)), 0o644); err != nil {
		return nil, err
	}
	sock := filepath.Join(e.dir, "net.sock")
	args := []string{"--policy", pf, "--data", filepath.Join(e.dir, "data"), "--ca-dir", b.caDir,
		"--listen-qemu", "unix://" + sock, "--mtu", strconv.Itoa(*flagMTU), "--log-level", "warn"}
	if *flagProfile != "" {
		p, _ := filepath.Abs(filepath.Join(*flagProfile, fmt.Sprintf("capsem-net-rep%d.pprof", rep)))
		args = append(args, "--cpu-profile", p)
	}
	e.cmd = exec.Command(b.capsemNet, args...)
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	var err error
	if e.ns, err = harness.NewNamespace(*flagMTU); err != nil {
		e.stop()
		return nil, err
	}
	conn, err := harness.DialQEMU(sock, 10*time.Second)
	if err != nil {
		e.stop()
		return nil, fmt.Errorf("%v\ncapsem-net: %s", err, e.out.String())
	}
	e.pump = harness.StartPump(e.ns.TAP, conn)
	if _, err := e.ns.DHCP(); err != nil {
		e.stop()
		return nil, fmt.Errorf("dhcp: %v\ncapsem-net: %s", err, e.out.String())
	}
	return e, nil
}

// stop ends capsem-net with SIGTERM (so that it writes its CPU profile and
// flushes its events) and removes the namespace.
func (e *env) stop() {
	if e.cmd != nil && e.cmd.Process != nil {
		e.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { e.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.cmd.Process.Kill()
			<-done
		}
		if *flagVerbose {
			fmt.Fprintf(os.Stderr, "capsem-net output:\n%s", e.out.String())
		}
	}
	if e.pump != nil {
		e.pump.Close()
	}
	if e.ns != nil {
		e.ns.Close()
	}
}

func listHas(list, what string) bool {
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == what {
			return true
		}
	}
	return false
}

func listOf(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// rep runs every measurement once, with a fresh capsem-net and namespace.
// The paths alternate within each measurement, so that drift over the run
// hits all of them alike.
func (b *bench) rep(rep int) error {
	e, err := b.startEnv(rep)
	if err != nil {
		return err
	}
	b.env = e
	defer func() {
		e.stop()
		b.env = nil
	}()
	paths := listOf(*flagPaths)
	if !listHas(*flagSkip, "dl") {
		for _, proto := range listOf(*flagDLProtos) {
			for _, where := range paths {
				s, err := b.retry(func() (sample, error) { return b.download(where, proto) })
				if err != nil {
					return err
				}
				b.add("dl/"+proto+"/"+where, s)
				fmt.Fprintf(os.Stderr, "rep %d  download %s %-6s %6.2f Gbit/s  %s\n", rep, proto, where, s.v, s.cpu)
			}
		}
	}
	if !listHas(*flagSkip, "rps") {
		for _, conns := range connsList() {
			for _, proto := range listOf(*flagRPSProtos) {
				for _, where := range paths {
					s, err := b.retry(func() (sample, error) { return b.load(where, proto, conns, *flagDuration, false) })
					if err != nil {
						return err
					}
					b.add(rpsKey(proto, conns)+where, s)
					fmt.Fprintf(os.Stderr, "rep %d  req/s    %s c%-3d %-6s %8.0f  %s\n", rep, proto, conns, where, s.v, s.cpu)
				}
			}
		}
	}
	if !listHas(*flagSkip, "lat") {
		for _, where := range paths {
			s, err := b.retry(func() (sample, error) { return b.load(where, "h1", 1, *flagLatDur, true) })
			if err != nil {
				return err
			}
			b.add("lat/h1/"+where, s)
			fmt.Fprintf(os.Stderr, "rep %d  latency  h1 %-6s p50 %6.0f µs  p99 %6.0f µs  %s\n", rep, where, s.v, s.p99, s.cpu)
		}
	}
	return nil
}

// waitQuiet waits (up to a minute) until the machine is idle: the figures
// are CPU-bound, and anything else running on the two cores shows up in
// them. It returns the background load it last saw, in cores.
func waitQuiet() float64 {
	var load float64
	for deadline := time.Now().Add(time.Minute); ; {
		j0 := machineCPU()
		time.Sleep(500 * time.Millisecond)
		j1 := machineCPU()
		load = cores(j1.busy-j0.busy, j0.total, j1.total)
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
	for _, s := range listOf(*flagConns) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-conns %q: want positive numbers", *flagConns))
		}
		out = append(out, n)
	}
	return out
}

// target is where a path's client connects and what it trusts.
func (b *bench) target(where string) (addr, sni, ca string, inGuest bool) {
	switch where {
	case "mitm":
		return "mitm.test:443", "mitm.test", b.capsemCA, true
	case "pass":
		return "pass.test:443", "pass.test", b.upstreamCA, true
	default: // direct: the host to the upstream's loopback port
		return "127.0.0.1:" + strconv.Itoa(b.upstreamPort), "mitm.test", b.upstreamCA, false
	}
}

func (b *bench) command(ctx context.Context, inGuest bool, name string, args ...string) *exec.Cmd {
	if inGuest {
		return b.env.ns.Command(ctx, name, args...)
	}
	return exec.CommandContext(ctx, name, args...)
}

// download fetches -bytes with curl and returns Gbit/s.
func (b *bench) download(where, proto string) (sample, error) {
	_, sni, ca, inGuest := b.target(where)
	url := fmt.Sprintf("https://%s/bytes?n=%d", sni, *flagBytes)
	args := []string{"-sS", "-o", "/dev/null", "--max-time", "600", "--cacert", ca,
		"-w", "%{size_download} %{time_total} %{http_version}"}
	if !inGuest {
		url = fmt.Sprintf("https://%s:%d/bytes?n=%d", sni, b.upstreamPort, *flagBytes)
		args = append(args, "--resolve", fmt.Sprintf("%s:%d:127.0.0.1", sni, b.upstreamPort))
	}
	want := "1.1"
	switch proto {
	case "h1":
		args = append(args, "--http1.1")
	case "h2":
		args = append(args, "--http2")
		want = "2"
	default:
		return sample{}, fmt.Errorf("unknown download protocol %q", proto)
	}
	args = append(args, url)
	var out bytes.Buffer
	cmd := b.command(context.Background(), inGuest, "curl", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	var s sample
	cpu, err := b.measureCPU(cmd)
	if err != nil {
		return s, fmt.Errorf("curl %s: %v: %s", strings.Join(args, " "), err, out.String())
	}
	f := strings.Fields(out.String())
	if len(f) != 3 {
		return s, fmt.Errorf("curl output %q", out.String())
	}
	size, _ := strconv.ParseFloat(f[0], 64)
	secs, _ := strconv.ParseFloat(f[1], 64)
	if int64(size) != *flagBytes || secs <= 0 {
		return s, fmt.Errorf("curl %s: got %s bytes in %s s", url, f[0], f[1])
	}
	if f[2] != want {
		return s, fmt.Errorf("curl %s: spoke HTTP/%s, want HTTP/%s", url, f[2], want)
	}
	s.v, s.cpu = size*8/secs/1e9, cpu
	return s, nil
}

// load runs the loadgen sub-mode: in the guest for pass and mitm, on the
// host for direct.
func (b *bench) load(where, proto string, conns int, d time.Duration, latency bool) (sample, error) {
	addr, sni, ca, inGuest := b.target(where)
	args := []string{"loadgen", "-addr", addr, "-sni", sni, "-ca", ca, "-proto", proto,
		"-conns", strconv.Itoa(conns), "-h2-conns", strconv.Itoa(*flagH2Conns), "-t", d.String()}
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := b.command(ctx, inGuest, b.exe, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var s sample
	cpu, err := b.measureCPU(cmd)
	if err != nil {
		return s, fmt.Errorf("loadgen %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	var r loadResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return s, fmt.Errorf("loadgen output %q: %v", out.String(), err)
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

// cpuUse is how many cores each party used during one measurement.
type cpuUse struct {
	client, capsem, pump, upstream float64
	kernel                         float64 // interrupts and softirqs (network processing outside any process's account)
	other                          float64 // the rest of the machine's busy time: other processes (interference)
	machine                        float64
}

func (c cpuUse) String() string {
	return fmt.Sprintf("[cores: client %.2f capsem-net %.2f pump %.2f upstream %.2f softirq %.2f other %.2f machine %.2f]", c.client, c.capsem, c.pump, c.upstream, c.kernel, c.other, c.machine)
}

// measureCPU runs cmd and returns the cores each party used meanwhile:
// the client (cmd itself: ip netns exec execs it in place), capsem-net,
// this process (the frame pump), the upstream, and the whole machine.
func (b *bench) measureCPU(cmd *exec.Cmd) (cpuUse, error) {
	capsemPID := 0
	if b.env != nil {
		capsemPID = b.env.cmd.Process.Pid
	}
	upPID, self := b.upstream.Process.Pid, os.Getpid()
	c0, u0, s0 := procCPU(capsemPID), procCPU(upPID), procCPU(self)
	j0 := machineCPU()
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0).Seconds()
	c1, u1, s1 := procCPU(capsemPID), procCPU(upPID), procCPU(self)
	j1 := machineCPU()
	if err != nil {
		return cpuUse{}, err
	}
	var use cpuUse
	if ps := cmd.ProcessState; ps != nil {
		use.client = (ps.UserTime() + ps.SystemTime()).Seconds() / wall
	}
	use.capsem, use.upstream, use.pump = (c1-c0)/wall, (u1-u0)/wall, (s1-s0)/wall
	use.machine = cores(j1.busy-j0.busy, j0.total, j1.total)
	use.kernel = cores(j1.irq-j0.irq, j0.total, j1.total)
	use.other = max(0, use.machine-use.client-use.capsem-use.pump-use.upstream-use.kernel)
	return use, nil
}

const clockTicks = 100 // USER_HZ on Linux

// procCPU is a process's user+system CPU seconds so far.
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// jiffies are the machine's CPU counters from /proc/stat, all CPUs.
type jiffies struct{ busy, irq, total float64 }

func machineCPU() jiffies {
	var j jiffies
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return j
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	// user nice system idle iowait irq softirq steal (guest and guest_nice
	// are already in user and nice)
	for i, s := range f[1:min(len(f), 9)] {
		v, _ := strconv.ParseFloat(s, 64)
		j.total += v
		switch i {
		case 3, 4, 7: // idle, iowait, steal
		case 5, 6:
			j.irq += v
			j.busy += v
		default:
			j.busy += v
		}
	}
	return j
}

// cores converts a difference of jiffies into cores.
func cores(d, total0, total1 float64) float64 {
	if total1 <= total0 {
		return 0
	}
	return float64(runtime.NumCPU()) * d / (total1 - total0)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return v[len(v)/2]
}

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
		return median(xs)
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

var protoName = map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2"}

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
	fmt.Fprintf(w, "| measurement | direct (host → upstream) | passthrough (TCP forwarding) | MITM | MITM vs passthrough | MITM vs direct | target |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---|\n")
	if !listHas(*flagSkip, "dl") {
		for _, proto := range listOf(*flagDLProtos) {
			k := "dl/" + proto + "/"
			verdict := "–"
			if m, _, _, ok := b.med(k + "mitm"); ok {
				if p, _, _, ok := b.med(k + "pass"); ok && p > 0 {
					verdict = metOrNot(m >= 0.5*p) + " (≥ 50 % of passthrough)"
				}
			}
			fmt.Fprintf(w, "| %s download, %s, Gbit/s | %s | %s | %s | %s | %s | %s |\n", sizeName(*flagBytes), protoName[proto],
				cell(k+"direct", "%.2f"), cell(k+"pass", "%.2f"), cell(k+"mitm", "%.2f"), ratio(k+"mitm", k+"pass"), ratio(k+"mitm", k+"direct"), verdict)
		}
	}
	if !listHas(*flagSkip, "rps") {
		for _, conns := range connsList() {
			for _, proto := range listOf(*flagRPSProtos) {
				k := rpsKey(proto, conns)
				verdict := "–"
				if m, _, _, ok := b.med(k + "mitm"); ok {
					verdict = metOrNot(m >= 10000) + " (≥ 10,000)"
				}
				what := fmt.Sprintf("%d keep-alive connections", conns)
				if proto == "h2" {
					what = fmt.Sprintf("%d concurrent streams on %d connection(s)", conns, *flagH2Conns)
				}
				fmt.Fprintf(w, "| requests/s, %s, %s, GET /ping | %s | %s | %s | %s | %s | %s |\n", protoName[proto], what,
					cell(k+"direct", "%.0f"), cell(k+"pass", "%.0f"), cell(k+"mitm", "%.0f"), ratio(k+"mitm", k+"pass"), ratio(k+"mitm", k+"direct"), verdict)
			}
		}
	}
	if !listHas(*flagSkip, "lat") {
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
			fmt.Fprintf(w, "| latency %s, µs, HTTP/1.1 keep-alive, concurrency 1 | %s | %s | %s | %s | %s | added %s: %s |\n", pct,
				c("direct"), c("pass"), c("mitm"), a, d, pct, d)
		}
	}
	fmt.Fprintf(w, "\nCPU during each run, in cores of %d (median of the repetitions): the client (curl or the load generator), capsem-net, the frame pump (the benchmark process), the upstream server, interrupts and softirqs (network processing not charged to a process), other processes, and the whole machine.\n\n", runtime.NumCPU())
	fmt.Fprintf(w, "| run | path | client | capsem-net | pump | upstream | softirq | other | machine |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range b.order {
		_, _, cpu, _ := b.med(k)
		p := strings.Split(k, "/")
		run := map[string]string{"dl": "download", "rps": "requests/s", "lat": "latency"}[p[0]] + " " + protoName[p[1]]
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
