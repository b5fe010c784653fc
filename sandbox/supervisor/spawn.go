package supervisor

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/home"
)

// Spawn starts the supervisor of sandbox d detached — exe with args, the
// command line that runs Run (`capsem supervise … NAME`), in a session of
// its own, its output appended to supervisor.log — and waits for its one
// Ready on an inherited pipe (ReporterFromEnv). A supervisor that dies
// before reporting is told with the end of its log.
func Spawn(d home.Dir, exe string, args []string) error {
	logf, err := os.OpenFile(d.Log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- %s capsem start %s\n", time.Now().UTC().Format(time.RFC3339), d.Name)
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), ReadyFDEnv+"=3")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the supervisor: %w", err)
	}
	w.Close()
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	b, _ := io.ReadAll(r) // the supervisor reports once, or dies (EOF)
	var m Ready
	if json.Unmarshal(b, &m) != nil {
		tail := strings.TrimSpace(sandbox.ConsoleTail(d.Log(), 10))
		return fmt.Errorf("the supervisor (pid %d) exited without saying why; its log %s ends:\n  %s", pid, d.Log(), tail)
	}
	if m.Running {
		return home.AlreadyRunningError{Name: d.Name}
	}
	if !m.OK {
		err := fmt.Errorf("sandbox %s did not start: %s\n(the supervisor's log: %s)", d.Name, m.Error, d.Log())
		if m.Restoring {
			return RestoreError{err}
		}
		return err
	}
	return nil
}
