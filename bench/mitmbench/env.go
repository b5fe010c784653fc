package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// policyTemplate is the policy of the direct, pass and mitm paths. DLP is
// off (it defaults to log) and there is no secret, so that the mitm path
// is interception alone: the baseline of mitm-secrets.
const policyTemplate = `[network]
default = "deny"
allow = ["mitm.test:443", "pass.test:443"]

[upstream]
resolve = { "mitm.test" = "127.0.0.1:%[1]d", "pass.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[tls]
passthrough = ["pass.test"]

[dlp]
action = "off"
`

// secretsPolicyTemplate is the policy of the mitm-secrets path: the same
// intercepted host, with a secret bound to it (its placeholder replaced in
// every request, its real value scrubbed from every response), a secret
// bound to another host (its placeholder and real value looked for as
// leaks in every request), and the DLP scan of every request with all
// detectors. The placeholder is fixed so that the load generator can send
// it without reading placeholders.json.
const secretsPolicyTemplate = `[network]
default = "deny"
allow = ["mitm.test:443"]

[upstream]
resolve = { "mitm.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[dlp]
action = "log"

[[secret]]
name = "BENCH_TOKEN"
from_file = %[3]q
hosts = ["mitm.test"]
placeholder = %[4]q

[[secret]]
name = "OTHER_TOKEN"
from_file = %[5]q
hosts = ["api.other.test"]
`

// startEnv starts a capsem-net and its guest namespace: with the policy of
// the mitm-secrets path when secrets is set, else with policyTemplate.
func (b *bench) startEnv(rep int, secrets bool) (*env, error) {
	name := fmt.Sprintf("rep%d", rep)
	if secrets {
		name += "-secrets"
	}
	e := &env{out: &harness.SyncBuffer{}, dir: filepath.Join(b.dir, name)}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}
	pol := fmt.Sprintf(policyTemplate, b.upstreamPort, b.upstreamCA)
	if secrets {
		pol = fmt.Sprintf(secretsPolicyTemplate, b.upstreamPort, b.upstreamCA, b.tokens.realFile, b.tokens.placeholder, b.tokens.otherFile)
	}
	pf := filepath.Join(e.dir, "policy.toml")
	if err := os.WriteFile(pf, []byte(pol), 0o644); err != nil {
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
