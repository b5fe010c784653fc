package mcpgate

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitDelay bounds how long the wait for a dead server's stderr lasts when a
// process it started (a grandchild) still holds the pipe.
const waitDelay = time.Second

// process is a stdio server's process, in its own process group.
type process struct {
	cmd    *exec.Cmd
	stderr *stderrLog
	exited chan struct{} // closed when Wait returned
	err    error         // Wait's error, once exited
}

// serverEnv is a stdio server's whole environment: capsem's PATH and HOME,
// then its own env.
func serverEnv(own map[string]string) []string {
	env := map[string]string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range own {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// startProcess starts cfg's command and returns the transport to it.
func startProcess(cfg Server, log *slog.Logger, budget *stderrBudget) (*process, mcp.Transport, error) {
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env = serverEnv(cfg.Env)
	cmd.Dir = cfg.Cwd
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)
	p := &process{cmd: cmd, stderr: newStderrLog(log, cfg.Name, budget), exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	// Pipes of our own rather than cmd.StdinPipe/StdoutPipe: Wait closes
	// those, and Wait runs as soon as the process exits, while the SDK
	// may still be reading what it wrote.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("mcpgate: starting MCP server %q: %w", cfg.Name, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, fmt.Errorf("mcpgate: starting MCP server %q: %w", cfg.Name, err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, fmt.Errorf("mcpgate: starting MCP server %q (%s): %w; check command in [mcp.servers.%s]", cfg.Name, cfg.Command[0], err, cfg.Name)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, &mcp.IOTransport{Reader: outR, Writer: inW}, nil
}

// Pid is the process id of the server (its process group's id).
func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// describe says how the process ended (or that it has not), with the end of
// what it wrote to stderr.
func (p *process) describe() string {
	s := "still running"
	if p.hasExited() {
		switch {
		case p.cmd.ProcessState != nil:
			s = p.cmd.ProcessState.String()
		case p.err != nil:
			s = p.err.Error()
		}
	}
	if tail := p.stderr.tail(); tail != "" {
		s += "; its last stderr: " + tail
	}
	return s
}

// stop waits up to grace for the process to exit (its stdin is closed by
// then), then kills its process group — always, so that what it started
// goes too — and waits for it.
func (p *process) stop(grace time.Duration) {
	if grace > 0 {
		select {
		case <-p.exited:
		case <-time.After(grace):
		}
	}
	killGroup(p.cmd)
	select {
	case <-p.exited:
	case <-time.After(waitDelay + time.Second):
	}
}
