package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/capsem/capsem/bench/internal/listflag"

	"github.com/capsem/capsem/bench/internal/peerbin"
	"github.com/capsem/capsem/bench/internal/stats"
	"github.com/capsem/capsem/tests/harness"
)

var (
	flagDuration = flag.Duration("t", 10*time.Second, "duration of each iperf3 run and each connection-rate run")
	flagReps     = flag.Int("reps", 3, "repetitions of each measurement, each with a fresh peer and namespace (the median is reported)")
	flagPeers    = flag.String("peers", "capsem-net,gvproxy,passt", "peers to measure, comma separated")
	flagMTUs     = flag.String("mtus", "1500,65520", "guest MTUs to measure, comma separated")
	flagCache    = flag.String("cache", ".cache/bin", "where built peer binaries are kept")
	flagSkip     = flag.String("skip", "", "measurements to skip: any of up,down,conn")
	flagProfile  = flag.String("capsem-profile", "", "write capsem-net CPU profiles to DIR (one per MTU)")
)

// peer is one userspace network stack under test.
type peer struct {
	name string
	// start launches the peer listening on sock and returns the address
	// the guest dials for host loopback, and a stop func.
	start func(dir, sock string, mtu int, iperfPort, connPort int) (target string, stop func(), err error)
	// guestMAC, when set, is given to the TAP (gvproxy leases by MAC).
	guestMAC string
}

type result struct {
	peer           string
	mtu            int
	upGbps, downGb float64
	connsPerSec    float64
	note           string
	err            error
}

func main() {
	flag.Parse()
	if why := harness.Requirements("iperf3", "python3"); why != "" {
		fmt.Fprintln(os.Stderr, "netbench:", why)
		os.Exit(2)
	}
	cache, _ := filepath.Abs(*flagCache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		fatal(err)
	}
	peers := map[string]peer{}
	for _, name := range strings.Split(*flagPeers, ",") {
		p, err := makePeer(strings.TrimSpace(name), cache)
		if err != nil {
			fmt.Fprintf(os.Stderr, "netbench: %s unavailable: %v\n", name, err)
			continue
		}
		peers[p.name] = p
	}
	iperfPort, stopIperf, err := startIperfServer()
	if err != nil {
		fatal(err)
	}
	defer stopIperf()
	connPort, stopConn, err := startAcceptCloser()
	if err != nil {
		fatal(err)
	}
	defer stopConn()

	var results []result
	for _, mtuS := range strings.Split(*flagMTUs, ",") {
		mtu, err := strconv.Atoi(strings.TrimSpace(mtuS))
		if err != nil {
			fatal(err)
		}
		for _, name := range strings.Split(*flagPeers, ",") {
			p, ok := peers[strings.TrimSpace(name)]
			if !ok {
				continue
			}
			r := measureReps(p, mtu, iperfPort, connPort)
			if r.err != nil {
				fmt.Fprintf(os.Stderr, "netbench: %s at MTU %d: %v\n", p.name, mtu, r.err)
			}
			results = append(results, r)
			fmt.Fprintf(os.Stderr, "%-10s mtu %-5d up %6.2f Gbit/s  down %6.2f Gbit/s  %7.0f conn/s\n", r.peer, r.mtu, r.upGbps, r.downGb, r.connsPerSec)
		}
	}
	printTable(results)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "netbench:", err)
	os.Exit(1)
}

func makePeer(name, cache string) (peer, error) {
	switch name {
	case "capsem-net":
		bin := filepath.Join(cache, "capsem-net")
		if err := peerbin.BuildCapsemNet(bin); err != nil {
			return peer{}, err
		}
		return peer{name: name, start: func(dir, sock string, mtu, iperfPort, connPort int) (string, func(), error) {
			pol := fmt.Sprintf(`[network]
allow = ["iperf.test:%d", "conn.test:%d"]
[upstream]
resolve = { "iperf.test" = "127.0.0.1", "conn.test" = "127.0.0.1" }
`, iperfPort, connPort)
			pf := filepath.Join(dir, "policy.toml")
			if err := os.WriteFile(pf, []byte(pol), 0o644); err != nil {
				return "", nil, err
			}
			args := []string{"--policy", pf, "--data", filepath.Join(dir, "data"),
				"--listen-qemu", "unix://" + sock, "--mtu", strconv.Itoa(mtu), "--log-level", "warn"}
			if *flagProfile != "" {
				args = append(args, "--cpu-profile", filepath.Join(*flagProfile, fmt.Sprintf("capsem-net-mtu%d.pprof", mtu)))
			}
			stop, err := peerbin.Start(bin, args...)
			return "iperf.test", stop, err
		}}, nil
	case "gvproxy":
		bin, err := peerbin.Gvproxy(cache)
		if err != nil {
			return peer{}, err
		}
		return peer{name: name, guestMAC: peerbin.GvproxyGuestMAC, start: func(dir, sock string, mtu, _, _ int) (string, func(), error) {
			stop, err := peerbin.Start(bin, "-listen-qemu", "unix://"+sock, "-mtu", strconv.Itoa(mtu), "-ssh-port", "-1")
			// gvproxy NATs 192.168.127.254 to the host's loopback.
			return "192.168.127.254", stop, err
		}}, nil
	case "passt":
		bin, err := peerbin.Passt()
		if err != nil {
			return peer{}, err
		}
		return peer{name: name, start: func(dir, sock string, mtu, _, _ int) (string, func(), error) {
			// passt drops root for "nobody", which must be able to create
			// the socket in dir.
			if err := os.Chmod(dir, 0o777); err != nil {
				return "", nil, err
			}
			stop, err := peerbin.Start(bin, "-f", "-q", "-s", sock, "-m", strconv.Itoa(mtu), "-e", "-4", "-t", "none", "-u", "none")
			// passt maps the guest's default gateway to the host's loopback;
			// the gateway is read from the DHCP lease.
			return "", stop, err
		}}, nil
	}
	return peer{}, fmt.Errorf("unknown peer %q", name)
}

func measure(p peer, mtu, iperfPort, connPort int) (r result) {
	r.peer, r.mtu = p.name, mtu
	dir, err := os.MkdirTemp("", "netbench")
	if err != nil {
		r.err = err
		return
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "net.sock")
	target, stop, err := p.start(dir, sock, mtu, iperfPort, connPort)
	if err != nil {
		r.err = err
		return
	}
	defer stop()
	g, err := peerbin.AttachGuest(sock, mtu, p.guestMAC)
	if err != nil {
		r.err = err
		return
	}
	defer g.Close()
	ns, lease := g.NS, g.Lease
	if target == "" {
		target = lease.Router
	}
	connTarget := target
	if target == "iperf.test" {
		connTarget = "conn.test"
	}
	var note string
	if !skip("up") {
		if r.upGbps, err = iperf(ns, target, iperfPort, false); err != nil {
			r.err = err
			return
		}
	}
	if !skip("down") {
		if r.downGb, err = iperf(ns, target, iperfPort, true); err != nil {
			r.err = err
			return
		}
	}
	if !skip("conn") {
		if r.connsPerSec, note, err = connRate(ns, connTarget, connPort); err != nil {
			r.err = err
			return
		}
		r.note = note
	}
	return r
}

// measureReps repeats measure, each time with a fresh peer process and a
// fresh namespace (no state carried between repetitions), and reports the
// median of each figure.
func measureReps(p peer, mtu, iperfPort, connPort int) result {
	var ups, downs, conns []float64
	var notes []string
	for i := 0; i < *flagReps; i++ {
		r := measure(p, mtu, iperfPort, connPort)
		if r.err != nil {
			return r
		}
		ups, downs, conns = append(ups, r.upGbps), append(downs, r.downGb), append(conns, r.connsPerSec)
		if r.note != "" {
			notes = append(notes, r.note)
		}
	}
	r := result{peer: p.name, mtu: mtu, upGbps: stats.Median(ups), downGb: stats.Median(downs), connsPerSec: stats.Median(conns)}
	if len(notes) > 0 {
		r.note = fmt.Sprintf("%d of %d runs: %s", len(notes), *flagReps, strings.Join(notes, "; "))
	}
	return r
}

func skip(what string) bool { return listflag.Has(*flagSkip, what) }

func iperf(ns *harness.Namespace, target string, port int, reverse bool) (float64, error) {
	args := []string{"-c", target, "-p", strconv.Itoa(port), "-t", strconv.Itoa(int(flagDuration.Seconds())), "-J"}
	if reverse {
		args = append(args, "-R")
	}
	out, err := ns.Run(*flagDuration+30*time.Second, "iperf3", args...)
	if err != nil {
		return 0, fmt.Errorf("iperf3 %v: %v: %s", args, err, tail(out))
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return 0, fmt.Errorf("iperf3 output: %v: %s", err, tail(out))
	}
	if res.Error != "" {
		return 0, errors.New("iperf3: " + res.Error)
	}
	return res.End.SumReceived.BitsPerSecond / 1e9, nil
}

const connProbe = `
import socket, sys, time
host, port, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
addr = socket.gethostbyname(host)
n = 0
end = time.monotonic() + dur
while time.monotonic() < end:
    t0 = time.monotonic()
    try:
        s = socket.create_connection((addr, port), timeout=5)
    except OSError as e:
        # A stall: report the rate up to it and how many succeeded.
        print(n / (t0 - (end - dur)), "stalled-after", n, e)
        sys.exit(0)
    s.close()
    n += 1
print(n / dur)
`

// connRate counts sequential connect+close cycles per second.
func connRate(ns *harness.Namespace, host string, port int) (float64, string, error) {
	d := flagDuration.Seconds() / 2
	out, err := ns.Run(time.Duration(d*float64(time.Second))+30*time.Second, "python3", "-c", connProbe, host, strconv.Itoa(port), fmt.Sprint(d))
	if err != nil {
		return 0, "", fmt.Errorf("connection rate: %v: %s", err, tail(out))
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return 0, "", fmt.Errorf("connection rate: no output")
	}
	rate, err := strconv.ParseFloat(f[0], 64)
	note := ""
	if len(f) >= 3 && f[1] == "stalled-after" {
		note = "stalled after " + f[2] + " connects (5 s connect timeout)"
	}
	return rate, note, err
}

func tail(s string) string {
	if len(s) > 600 {
		return "…" + s[len(s)-600:]
	}
	return s
}

func startIperfServer() (int, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "iperf3", "-s", "-B", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		return 0, nil, err
	}
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return port, func() { cancel(); cmd.Wait() }, nil
}

// startAcceptCloser is the connection-rate upstream: accept, close.
func startAcceptCloser() (int, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, func() { l.Close() }, nil
}

func printTable(results []result) {
	base := map[int]result{}
	for _, r := range results {
		if r.peer == "gvproxy" {
			base[r.mtu] = r
		}
	}
	fmt.Printf("| peer | MTU | guest→host Gbit/s | host→guest Gbit/s | connects/s | vs gvproxy (up / down / conn) | note |\n")
	fmt.Printf("|---|---:|---:|---:|---:|---|---|\n")
	for _, r := range results {
		if r.err != nil {
			fmt.Printf("| %s | %d | failed: %s | | | | |\n", r.peer, r.mtu, strings.ReplaceAll(r.err.Error(), "\n", " "))
			continue
		}
		ratio := ""
		if b, ok := base[r.mtu]; ok && b.err == nil && b.upGbps > 0 && b.downGb > 0 && b.connsPerSec > 0 {
			ratio = fmt.Sprintf("%.2f× / %.2f× / %.2f×", r.upGbps/b.upGbps, r.downGb/b.downGb, r.connsPerSec/b.connsPerSec)
		}
		fmt.Printf("| %s | %d | %.2f | %.2f | %.0f | %s | %s |\n", r.peer, r.mtu, r.upGbps, r.downGb, r.connsPerSec, ratio, r.note)
	}
}
