package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/capsem/capsem/tests/harness"
)

// env is one peer process wired to one guest namespace and one upstream.
type env struct {
	p         peer
	dir, sock string
	cmd       *exec.Cmd
	out       *harness.SyncBuffer
	done      chan struct{}
	ns        *harness.Namespace
	pump      *harness.Pump
	up        *upstream
	closed    int    // a loopback port nothing listens on
	debugAddr string // capsem-net's pprof, "" for the others
	cfg       guestConfig
	start     time.Time
}

// startEnv starts a fresh peer process, namespace and upstream, takes a
// DHCP lease and runs the guest's setup (one DNS query, one allowed flow).
func startEnv(p peer) (e *env, err error) {
	e = &env{p: p, out: &harness.SyncBuffer{}, done: make(chan struct{})}
	defer func() {
		if err != nil {
			e.stop()
			err = fmt.Errorf("%s: %w", p.name, err)
		}
	}()
	if e.dir, err = os.MkdirTemp("", "soakbench"); err != nil {
		return e, err
	}
	e.sock = filepath.Join(e.dir, "net.sock")
	if e.up, err = startUpstream(); err != nil {
		return e, err
	}
	if e.closed, err = closedPort(); err != nil {
		return e, err
	}
	args, err := p.args(e)
	if err != nil {
		return e, err
	}
	if err := evictPageCache(p.bin); err != nil {
		return e, fmt.Errorf("evict %s from the page cache: %w", p.bin, err)
	}
	e.cmd = exec.Command(p.bin, args...)
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	if p.name == "capsem-net" && *flagCapsemEnv != "" {
		e.cmd.Env = append(os.Environ(), strings.Fields(*flagCapsemEnv)...)
	}
	if err := e.cmd.Start(); err != nil {
		return e, err
	}
	e.start = time.Now()
	go func() { e.cmd.Wait(); close(e.done) }()
	if e.ns, err = harness.NewNamespace(*flagMTU); err != nil {
		return e, err
	}
	if p.guestMAC != "" {
		if err := e.ns.IP("link", "set", "tap0", "address", p.guestMAC); err != nil {
			return e, err
		}
	}
	conn, err := harness.DialQEMU(e.sock, 10*time.Second)
	if err != nil {
		return e, fmt.Errorf("%w (peer output: %s)", err, tail(e.out.String()))
	}
	e.pump = harness.StartPump(e.ns.TAP, conn)
	lease, err := e.ns.DHCP()
	if err != nil {
		return e, fmt.Errorf("dhcp: %w", err)
	}
	e.cfg = p.guest(e, lease)
	e.cfg.Rates = guestRates{
		DNSAllowed: *flagDNSRate, DNSDenied: *flagDeniedDNSRate, Short: *flagFlowRate, SYN: *flagSYNRate,
		Long: *flagLong, LongBytes: *flagLongBytes, LongRate: *flagLongRate,
	}
	if out, err := e.guest(time.Minute, "setup"); err != nil {
		return e, fmt.Errorf("guest setup: %v: %s", err, tail(out))
	}
	return e, nil
}

func (e *env) stop() {
	if e.pump != nil {
		e.pump.Close()
	}
	if e.cmd != nil && e.cmd.Process != nil {
		e.cmd.Process.Signal(os.Interrupt)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			e.cmd.Process.Kill()
			<-e.done
		}
	}
	if e.ns != nil {
		e.ns.Close()
	}
	if e.up != nil {
		e.up.close()
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
	if *flagVerbose && e.cmd != nil {
		fmt.Fprintf(os.Stderr, "--- %s output:\n%s\n", e.p.name, e.out.String())
	}
}

// guestCommand returns the guest script prepared to run in the namespace.
func (e *env) guestCommand(ctx context.Context, mode string, args ...string) *exec.Cmd {
	return e.ns.Command(ctx, "python3", append([]string{"-c", guestScript, mode, e.cfgJSON()}, args...)...)
}

// cfgJSON is the guest script's configuration argument.
func (e *env) cfgJSON() string {
	cfg, _ := json.Marshal(e.cfg)
	return string(cfg)
}

// guest runs the guest script to its end and returns its output.
func (e *env) guest(timeout time.Duration, mode string, args ...string) (string, error) {
	return e.ns.Run(timeout, "python3", append([]string{"-c", guestScript, mode, e.cfgJSON()}, args...)...)
}

// holder is a running "hold N" guest.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *harness.SyncBuffer
}

// hold opens n connections from the guest to the upstream and returns once
// the upstream holds all of them.
func (e *env) hold(n int) (*holder, error) {
	h := &holder{out: &harness.SyncBuffer{}}
	h.cmd = e.guestCommand(context.Background(), "hold", strconv.Itoa(n))
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	h.cmd.Stdout, h.cmd.Stderr = h.out, h.out
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- h.cmd.Wait() }()
	deadline := time.After(3 * time.Minute)
	for e.up.held.Load() < int64(n) {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("the guest stopped at %d of %d connections: %v: %s", e.up.held.Load(), n, err, tail(h.out.String()))
		case <-deadline:
			h.release()
			return nil, fmt.Errorf("only %d of %d connections established in 3 min: %s", e.up.held.Load(), n, tail(h.out.String()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	go func() { <-exited }()
	return h, nil
}

// release closes the guest's connections.
func (h *holder) release() { h.stdin.Close() }

// sampleHeld samples the peer while h's connections are held, once they
// have settled, writes the heap profile name (see heapProfile), and then
// releases them.
func (e *env) sampleHeld(h *holder, profile string) (sample, error) {
	// Let the handshakes' last segments and any deferred work settle.
	time.Sleep(5 * time.Second)
	s, err := e.sample()
	e.heapProfile(profile)
	h.release()
	return s, err
}

// waitHeld waits until the upstream holds at most n connections.
func (e *env) waitHeld(n int64, timeout time.Duration) bool {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if e.up.held.Load() <= n {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// sample is what the peer process holds at one moment.
type sample struct {
	at              time.Duration // since the peer started
	rss, anon, file int64         // bytes: VmRSS, RssAnon, RssFile
	threads, fds    int
	goroutines      int   // -1 when the peer does not say
	heapInuse       int64 // Go heap in use (capsem-net only), bytes
	heapSys         int64 // Go heap obtained from the OS and not released (capsem-net only)
}

// sample reads /proc/PID/status, /proc/PID/fd and, for capsem-net, its
// pprof endpoint (goroutine count and the heap figures of runtime.MemStats;
// no GC is forced, so the sample does not move the RSS it reads).
func (e *env) sample() (sample, error) {
	s := sample{at: time.Since(e.start), goroutines: -1}
	pid := e.cmd.Process.Pid
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("%s (pid %d) is gone: %w (its output: %s)", e.p.name, pid, err, tail(e.out.String()))
	}
	for _, line := range strings.Split(string(st), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			s.rss = n << 10
		case "RssAnon":
			s.anon = n << 10
		case "RssFile":
			s.file = n << 10
		case "Threads":
			s.threads = int(n)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	if e.debugAddr != "" {
		if body, err := e.debugGet("/debug/pprof/goroutine?debug=1"); err == nil {
			first, _, _ := strings.Cut(body, "\n")
			if _, n, ok := strings.Cut(first, "total "); ok {
				s.goroutines, _ = strconv.Atoi(strings.TrimSpace(n))
			}
		}
		if body, err := e.debugGet("/debug/pprof/heap?debug=1"); err == nil {
			sc := bufio.NewScanner(strings.NewReader(body))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			var released int64
			for sc.Scan() {
				var k string
				var v int64
				if n, _ := fmt.Sscanf(sc.Text(), "# %s = %d", &k, &v); n != 2 {
					continue
				}
				switch k {
				case "HeapInuse":
					s.heapInuse = v
				case "HeapSys":
					s.heapSys = v
				case "HeapReleased":
					released = v
				}
			}
			s.heapSys -= released
		}
	}
	return s, nil
}

func (e *env) debugGet(path string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + e.debugAddr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// heapProfile writes capsem-net's heap profile to dir/name (for go tool
// pprof -top).
func (e *env) heapProfile(name string) {
	if e.debugAddr == "" || *flagProfile == "" {
		return
	}
	body, err := e.debugGet("/debug/pprof/heap")
	if err != nil {
		fmt.Fprintf(os.Stderr, "soakbench: heap profile %s: %v\n", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(*flagProfile, name), []byte(body), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "soakbench: heap profile %s: %v\n", name, err)
	}
}

func tail(s string) string {
	if len(s) > 800 {
		return "…" + s[len(s)-800:]
	}
	return s
}
