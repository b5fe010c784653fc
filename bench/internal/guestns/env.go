package guestns

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

// Config is what a guest is started with.
type Config struct {
	CapsemNet string // the capsem-net binary
	Root      string // the run's directory: the guest's files go into Root/Name
	Name      string // the guest's name: its directory, and its CPU profile's (capsem-net-NAME.pprof)
	Policy    string // the text of capsem-net's policy.toml
	CADir     string // capsem-net's --ca-dir (its CA, the one the guest trusts)
	MTU       int    // the guest link's MTU
	// ProfileDir gets capsem-net's CPU profile (written when it stops);
	// empty, no profile.
	ProfileDir string
	// Verbose prints capsem-net's output to stderr when it stops; false,
	// it is kept in [Env.Out] alone.
	Verbose bool
}

// Env is one guest namespace wired to one capsem-net process.
type Env struct {
	Cmd     *exec.Cmd           // capsem-net
	Out     *harness.SyncBuffer // capsem-net's stdout and stderr
	NS      *harness.Namespace
	Dir     string // Root/Name: policy.toml, capsem-net's socket and data
	pump    *harness.Pump
	verbose bool
}

// Start starts a capsem-net with c.Policy and its guest namespace, and
// waits for the guest's DHCP lease.
func Start(c Config) (*Env, error) {
	e := &Env{Out: &harness.SyncBuffer{}, Dir: filepath.Join(c.Root, c.Name), verbose: c.Verbose}
	if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return nil, err
	}
	pf := filepath.Join(e.Dir, "policy.toml")
	if err := os.WriteFile(pf, []byte(c.Policy), 0o644); err != nil {
		return nil, err
	}
	sock := filepath.Join(e.Dir, "net.sock")
	args := []string{"--policy", pf, "--data", filepath.Join(e.Dir, "data"), "--ca-dir", c.CADir,
		"--listen-qemu", "unix://" + sock, "--mtu", strconv.Itoa(c.MTU), "--log-level", "warn"}
	if c.ProfileDir != "" {
		p, _ := filepath.Abs(filepath.Join(c.ProfileDir, "capsem-net-"+c.Name+".pprof"))
		args = append(args, "--cpu-profile", p)
	}
	e.Cmd = exec.Command(c.CapsemNet, args...)
	e.Cmd.Stdout, e.Cmd.Stderr = e.Out, e.Out
	if err := e.Cmd.Start(); err != nil {
		return nil, err
	}
	var err error
	if e.NS, err = harness.NewNamespace(c.MTU); err != nil {
		e.Stop()
		return nil, err
	}
	conn, err := harness.DialQEMU(sock, 10*time.Second)
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("%v\ncapsem-net: %s", err, e.Out.String())
	}
	e.pump = harness.StartPump(e.NS.TAP, conn)
	if _, err := e.NS.DHCP(); err != nil {
		e.Stop()
		return nil, fmt.Errorf("dhcp: %v\ncapsem-net: %s", err, e.Out.String())
	}
	return e, nil
}

// PID is capsem-net's process id.
func (e *Env) PID() int { return e.Cmd.Process.Pid }

// Stop ends capsem-net with SIGTERM (so that it writes its CPU profile,
// stops the MCP gateway's stdio servers and flushes its events; SIGKILL
// after 30 s) and removes the namespace.
func (e *Env) Stop() {
	if e.Cmd != nil && e.Cmd.Process != nil {
		e.Cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { e.Cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.Cmd.Process.Kill()
			<-done
		}
		if e.verbose {
			fmt.Fprintf(os.Stderr, "capsem-net output:\n%s", e.Out.String())
		}
	}
	if e.pump != nil {
		e.pump.Close()
	}
	if e.NS != nil {
		e.NS.Close()
	}
}
