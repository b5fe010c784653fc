package upstream

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Process is a running upstream.
type Process struct {
	Cmd   *exec.Cmd
	Port  int // on 127.0.0.1
	stdin io.WriteCloser
}

// Start starts cmd (its stderr goes to this process's) and reads the port
// it prints. On an error the process is killed.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.Stderr = os.Stderr
	p := &Process{Cmd: cmd}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("upstream did not start: %w", err)
	}
	if p.Port, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		p.kill()
		return nil, fmt.Errorf("upstream port %q: %w", line, err)
	}
	return p, nil
}

// PID is the upstream's process id.
func (p *Process) PID() int { return p.Cmd.Process.Pid }

// Stop closes the upstream's stdin and waits for it to exit.
func (p *Process) Stop() {
	p.stdin.Close()
	p.Cmd.Wait()
}

func (p *Process) kill() {
	p.Cmd.Process.Kill()
	p.Cmd.Wait()
}
