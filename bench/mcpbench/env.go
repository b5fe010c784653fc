package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/capsem/capsem/tests/harness"
)

// env is one guest namespace wired to one capsem-net process.
type env struct {
	cmd  *exec.Cmd
	out  *harness.SyncBuffer
	ns   *harness.Namespace
	pump *harness.Pump
	dir  string
}

// policyTemplate is the policy of every guest path: the gateway's stdio
// server [mcp.servers.bench] (capsem's own test server, its absolute path:
// the gateway gives it only PATH and HOME), and mcp.test allowed and
// resolved to the remote MCP server on host loopback, whose CA is the
// benchmark's. Everything else is the default a user gets: DLP logs,
// hide_denied, no [[mcp.rules]] (every tool allowed, still decided and
// recorded per call).
const policyTemplate = `[network]
default = "deny"
allow = ["mcp.test:443"]

[upstream]
resolve = { "mcp.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[mcp.servers.bench]
command = [%[3]q, "mcp-test-server"]
`

// startEnv starts a capsem-net and its guest namespace.
func (b *bench) startEnv(rep int) (*env, error) {
	name := fmt.Sprintf("rep%d", rep)
	e := &env{out: &harness.SyncBuffer{}, dir: filepath.Join(b.dir, name)}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}
	pf := filepath.Join(e.dir, "policy.toml")
	if err := os.WriteFile(pf, []byte(fmt.Sprintf(policyTemplate, b.upstreamPort, b.upstreamCA, b.capsem)), 0o644); err != nil {
		return nil, err
	}
	sock := filepath.Join(e.dir, "net.sock")
	args := []string{"--policy", pf, "--data", filepath.Join(e.dir, "data"), "--ca-dir", b.caDir,
		"--listen-qemu", "unix://" + sock, "--mtu", strconv.Itoa(*flagMTU), "--log-level", "warn"}
	if *flagProfile != "" {
		p, _ := filepath.Abs(filepath.Join(*flagProfile, "capsem-net-"+name+".pprof"))
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

// stop ends capsem-net with SIGTERM (so that it writes its CPU profile,
// stops its stdio server and flushes its events) and removes the
// namespace.
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
