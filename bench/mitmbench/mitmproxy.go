package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capsem/capsem/bench/internal/listflag"
	"github.com/capsem/capsem/tests/harness"
)

// The mitmproxy path: Debian's mitmproxy (mitmdump) in transparent mode,
// the way it intercepts a machine's traffic without the client knowing of
// a proxy — the same position as capsem-net's MITM. Its client is a
// network namespace of its own whose only link is a veth pair to the host,
// where mitmdump runs as the router:
//
//	namespace: eth0 10.201.0.2/30, default via 10.201.0.1
//	   | veth
//	host: mpbPID 10.201.0.1/30, nft table ip mitmbench_mp_PID:
//	   prerouting: in on mpbPID, to 10.201.0.1:443 -> redirect to mitmdump's port
//	   output:     to 10.201.0.1:443 -> dnat 127.0.0.1:upstream
//
// The client dials 10.201.0.1:443 with SNI mitm.test. The output rule is
// for mitmdump's own upstream connection: transparent mode takes the
// destination from SO_ORIGINAL_DST, 10.201.0.1:443, where nobody listens,
// so the kernel sends it on to the benchmark's upstream, which mitmdump
// verifies against the upstream's CA as capsem-net does. mitmproxy has no
// HTTP/3, so the path is not in the HTTP/3 comparison.
const (
	mpHostAddr   = "10.201.0.1"
	mpClientAddr = "10.201.0.2"
	// mpPrefix names the namespace (mitmbench-mp-PID) and the nft table
	// (mitmbench_mp_PID) of this process, so that a later run can tell
	// the leftovers of a killed one from another run's.
	mpPrefix = "mitmbench-mp-"
	mpTable  = "mitmbench_mp_"
)

// mitmproxyFlags are mitmdump's options beside the mode, the address and
// the CAs.
var mitmproxyFlags = []string{
	// Without it mitmproxy reads a whole body into memory before
	// forwarding it: the 1 GiB download does not complete. 1m streams any
	// body above a megabyte, chunk by chunk, as capsem-net's MITM does.
	"--set", "stream_large_bodies=1m",
	// No flow printed: the log is not what is measured.
	"--set", "flow_detail=0", "-q",
	// lazy connects upstream once the client's request is read, eager
	// (the default) at the client's handshake. Lazy measured a little
	// faster (one run each, 2026-11-29: 1,250 against 1,074 keep-alive
	// HTTP/1.1 requests/s at 16 connections, 265 against 246 with a
	// connection per request, p50 848 against 888 µs), so mitmproxy is
	// measured at its better.
	"--set", "connection_strategy=lazy",
	// http2 is left on (the default), so that the HTTP/2 rows are HTTP/2
	// on both sides of mitmproxy, as through capsem-net.
}

// mitmproxyPeer is one repetition's mitmdump with its client namespace,
// veth pair and nft table.
type mitmproxyPeer struct {
	ns, hostIf, table string
	ca                string // the CA mitmdump signs with: what its client trusts
	cmd               *exec.Cmd
	out               *harness.SyncBuffer
	done              chan struct{} // closed when mitmdump has exited
	stop              sync.Once     // Stop runs once: from the repetition's end and from a signal
}

// checkMitmproxy drops the mitmproxy path from -paths, saying why, when
// mitmdump or nft is missing, and removes what killed runs left behind.
func checkMitmproxy() {
	if !listflag.Has(*flagPaths, "mitmproxy") {
		return
	}
	for _, t := range []struct{ bin, pkg string }{{"mitmdump", "mitmproxy"}, {"nft", "nftables"}} {
		if _, err := exec.LookPath(t.bin); err != nil {
			fmt.Fprintf(os.Stderr, "mitmbench: skipping the mitmproxy path: %s is not on PATH (apt-get install %s, or leave mitmproxy out of -paths)\n", t.bin, t.pkg)
			var keep []string
			for _, p := range listflag.Split(*flagPaths) {
				if p != "mitmproxy" {
					keep = append(keep, p)
				}
			}
			*flagPaths = strings.Join(keep, ",")
			return
		}
	}
	mitmproxyVersionLine = mitmproxyVersion()
	removeMitmproxyLeftovers()
}

// mitmproxyVersionLine is what mitmproxyVersion said, for the report.
var mitmproxyVersionLine string

// mitmproxyVersion is the first line of mitmdump --version ("Mitmproxy:
// 8.1.1"), for the report.
func mitmproxyVersion() string {
	out, err := exec.Command("mitmdump", "--version").Output()
	if err != nil {
		return "mitmdump (version unknown)"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// removeMitmproxyLeftovers deletes the namespaces (their veth pairs go
// with them) and nft tables of runs whose process is gone: a run killed
// with SIGKILL has no chance to, and its 10.201.0.1 would make the next
// run's fail.
func removeMitmproxyLeftovers() {
	gone := func(name, prefix string) bool {
		pid, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		return err == nil && strings.HasPrefix(name, prefix) && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && gone(f[0], mpPrefix) {
				fmt.Fprintf(os.Stderr, "mitmbench: removing namespace %s, left by a run that was killed\n", f[0])
				exec.Command("ip", "netns", "del", f[0]).Run()
			}
		}
	}
	if out, err := exec.Command("nft", "list", "tables", "ip").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 3 && gone(f[2], mpTable) {
				fmt.Fprintf(os.Stderr, "mitmbench: removing nft table ip %s, left by a run that was killed\n", f[2])
				exec.Command("nft", "delete", "table", "ip", f[2]).Run()
			}
		}
	}
}

// startMitmproxy sets up the client namespace, the veth pair and the nft
// table, and starts mitmdump, its CA in confDir (made on its first
// start). On an error it removes what it made.
func startMitmproxy(confDir string, upPort int, upstreamCA string) (p *mitmproxyPeer, err error) {
	pid := os.Getpid()
	p = &mitmproxyPeer{
		ns: fmt.Sprintf("%s%d", mpPrefix, pid), hostIf: fmt.Sprintf("mpb%d", pid), table: fmt.Sprintf("%s%d", mpTable, pid),
		ca: filepath.Join(confDir, "mitmproxy-ca-cert.pem"), out: &harness.SyncBuffer{},
	}
	defer func() {
		if err != nil {
			p.Stop()
			err = fmt.Errorf("mitmproxy path: %w", err)
		}
	}()
	steps := [][]string{
		{"ip", "netns", "add", p.ns},
		{"ip", "link", "add", p.hostIf, "type", "veth", "peer", "name", "eth0", "netns", p.ns},
		{"ip", "addr", "add", mpHostAddr + "/30", "dev", p.hostIf},
		{"ip", "link", "set", p.hostIf, "mtu", strconv.Itoa(*flagMTU), "up"},
		{"ip", "-n", p.ns, "addr", "add", mpClientAddr + "/30", "dev", "eth0"},
		{"ip", "-n", p.ns, "link", "set", "eth0", "mtu", strconv.Itoa(*flagMTU), "up"},
		{"ip", "-n", p.ns, "link", "set", "lo", "up"},
		{"ip", "-n", p.ns, "route", "add", "default", "via", mpHostAddr},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return p, fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	port, err := freePort(mpHostAddr)
	if err != nil {
		return p, err
	}
	rules := fmt.Sprintf(`table ip %[1]s {
  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    iifname %[2]q ip daddr %[3]s tcp dport 443 redirect to :%[4]d
  }
  chain out {
    type nat hook output priority -100; policy accept;
    ip daddr %[3]s tcp dport 443 dnat to 127.0.0.1:%[5]d
  }
}
`, p.table, p.hostIf, mpHostAddr, port, upPort)
	nft := exec.Command("nft", "-f", "-")
	nft.Stdin = strings.NewReader(rules)
	if out, err := nft.CombinedOutput(); err != nil {
		return p, fmt.Errorf("nft -f: %v: %s\n%s", err, out, rules)
	}
	if err := os.MkdirAll(confDir, 0o700); err != nil {
		return p, err
	}
	args := append([]string{"--mode", "transparent", "--listen-host", mpHostAddr, "-p", strconv.Itoa(port),
		"--set", "confdir=" + confDir, "--set", "ssl_verify_upstream_trusted_ca=" + upstreamCA}, mitmproxyFlags...)
	p.cmd = exec.Command("mitmdump", args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return p, err
	}
	p.done = make(chan struct{})
	go func() { p.cmd.Wait(); close(p.done) }()
	// mitmdump is listening 0.5 to 1 s after its start (longer the first
	// time, when it makes its CA).
	for deadline := time.Now().Add(30 * time.Second); !listening(port); {
		select {
		case <-p.done:
			return p, fmt.Errorf("mitmdump %s exited: %s", strings.Join(args, " "), p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("mitmdump %s: not listening on %s:%d after 30 s: %s", strings.Join(args, " "), mpHostAddr, port, p.out.String())
		}
	}
	if _, err := os.Stat(p.ca); err != nil {
		return p, fmt.Errorf("mitmdump made no CA in %s: %v", confDir, err)
	}
	return p, nil
}

// freePort is a TCP port free on addr, for mitmdump to listen on.
func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// listening reports whether something listens on mpHostAddr:port.
// (Connecting to find out would hand mitmdump a connection that is not
// a client's.)
func listening(port int) bool {
	out, _ := exec.Command("ss", "-Hltn", "src", fmt.Sprintf("%s:%d", mpHostAddr, port)).Output()
	return len(strings.TrimSpace(string(out))) > 0
}

// PID is mitmdump's process id.
func (p *mitmproxyPeer) PID() int { return p.cmd.Process.Pid }

// Command returns cmd prepared to run in the client namespace.
func (p *mitmproxyPeer) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", p.ns, name}, args...)...)
}

// Stop ends mitmdump (SIGTERM, SIGKILL after 5 s) and removes the nft
// table and the namespace, the veth pair with it; it says what it could
// not remove, and how to. A second call does nothing.
func (p *mitmproxyPeer) Stop() { p.stop.Do(p.remove) }

func (p *mitmproxyPeer) remove() {
	if p.done != nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if *flagVerbose {
			fmt.Fprintf(os.Stderr, "mitmdump output:\n%s", p.out.String())
		}
	}
	var errs []error
	for _, s := range [][]string{
		{"nft", "delete", "table", "ip", p.table},
		{"ip", "link", "del", p.hostIf},
		{"ip", "netns", "del", p.ns},
	} {
		out, err := exec.Command(s[0], s[1:]...).CombinedOutput()
		// What was never made is not an error; the host's end of the veth
		// pair is gone once the namespace's is, and the other way round.
		if err != nil && !strings.Contains(string(out), "No such file") && !strings.Contains(string(out), "Cannot find device") && !strings.Contains(string(out), "does not exist") {
			errs = append(errs, fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out))))
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "mitmbench: the mitmproxy path's cleanup failed (run the commands again as root): %v\n", err)
	}
}
