//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capsem/capsem/sandbox/api"
)

// bench is one run's capsem and scratch space: its own data directory,
// CA and workspace, all under work.
type bench struct {
	ctx                        context.Context // cancelled on SIGINT/SIGTERM
	capsem, work, data, ca, ws string
}

// cmdTimeout bounds one capsem command, so that a hung guest fails the
// bench instead of holding it.
const cmdTimeout = 3 * time.Minute

// capsemCmd runs capsem with args within timeout and returns its
// stdout; an error carries the command and its stderr. After an
// interrupt it starts nothing more, but a command already running is let
// finish: a `capsem start` killed half-way leaves a supervisor booting
// that `capsem rm --force` cannot end yet.
func (b *bench) capsemCmd(timeout time.Duration, args ...string) (string, error) {
	if err := b.ctx.Err(); err != nil {
		return "", fmt.Errorf("capsem %s: not run: interrupted", strings.Join(args, " "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.capsem, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("capsem %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// timed runs capsem with args and returns how long it took, from exec to
// exit.
func (b *bench) timed(args ...string) (time.Duration, error) {
	t0 := time.Now()
	_, err := b.capsemCmd(cmdTimeout, args...)
	return time.Since(t0), err
}

// start is `capsem start` of name with this run's data, CA and workspace
// and the default guest, plus extra flags (--from, --cold).
func (b *bench) start(name string, extra ...string) (time.Duration, error) {
	return b.timed(append(append(b.sandboxFlags("start"), extra...), name)...)
}

// sandboxFlags is command with this run's data, CA and workspace.
func (b *bench) sandboxFlags(command string) []string {
	return []string{command, "--data", b.data, "--ca-dir", b.ca, "--workspace", b.ws}
}

// execTrue is `capsem exec name -- true`.
func (b *bench) execTrue(name string) (time.Duration, error) {
	return b.timed("exec", "--data", b.data, name, "--", "true")
}

// startReady starts name and has it answer its first exec: the start's
// time and the time until that exec exited.
func (b *bench) startReady(name string, extra ...string) (start, ready time.Duration, err error) {
	t0 := time.Now()
	if start, err = b.start(name, extra...); err != nil {
		return
	}
	if _, err = b.execTrue(name); err != nil {
		return
	}
	return start, time.Since(t0), nil
}

// sh runs a shell command in name's guest and returns its stdout.
func (b *bench) sh(timeout time.Duration, name, script string) (string, error) {
	return b.capsemCmd(timeout, "exec", "--data", b.data, name, "--", "sh", "-c", script)
}

// marker is what checkMarker reads back: written into a guest's RAM
// (/dev/shm) before it is saved, it is there after a resume or in a
// fork, never after a boot.
const (
	markerPath = "/dev/shm/snapbench-marker"
	markerText = "snapbench saved this guest"
)

func (b *bench) writeMarker(name string) error {
	_, err := b.sh(cmdTimeout, name, fmt.Sprintf("echo '%s' > %s", markerText, markerPath))
	return err
}

// checkMarker says whether name's guest is a restored one.
func (b *bench) checkMarker(name string) error {
	out, err := b.sh(cmdTimeout, name, "cat "+markerPath+" 2>/dev/null || true")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != markerText {
		return fmt.Errorf("sandbox %s: no %s in its guest: it was booted, not restored", name, markerPath)
	}
	return nil
}

// rm removes name, running or not; a name that was never made (a fork
// that failed removes itself) is no error.
func (b *bench) rm(name string) error {
	if _, err := os.Stat(filepath.Join(b.data, "sandboxes", name)); os.IsNotExist(err) {
		return nil
	}
	_, err := b.capsemCmd(cmdTimeout, "rm", "--force", "--data", b.data, name)
	return err
}

func (b *bench) stop(name string) error {
	_, err := b.capsemCmd(cmdTimeout, "stop", "--data", b.data, name)
	return err
}

func (b *bench) suspend(name string) error {
	_, err := b.capsemCmd(cmdTimeout, "suspend", "--data", b.data, name)
	return err
}

// snapshot takes snapshot tag of name and returns its record as `capsem
// snapshots --json` lists it, with the wall time of `capsem snapshot`.
func (b *bench) snapshot(name, tag string) (api.Snapshot, time.Duration, error) {
	d, err := b.timed("snapshot", "--data", b.data, "--tag", tag, name)
	if err != nil {
		return api.Snapshot{}, 0, err
	}
	out, err := b.capsemCmd(cmdTimeout, "snapshots", "--data", b.data, "--json", name)
	if err != nil {
		return api.Snapshot{}, 0, err
	}
	var all []api.Snapshot
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		return api.Snapshot{}, 0, fmt.Errorf("capsem snapshots --json %s: %v", name, err)
	}
	for _, m := range all {
		if m.Tag == tag {
			return m, d, nil
		}
	}
	return api.Snapshot{}, 0, fmt.Errorf("capsem snapshots --json %s lists no %q after capsem snapshot --tag %s", name, tag, tag)
}

// status is name as `capsem ls --json` has it.
func (b *bench) status(name string) (api.Status, error) {
	out, err := b.capsemCmd(cmdTimeout, "ls", "--json", "--data", b.data)
	if err != nil {
		return api.Status{}, err
	}
	var list []api.Status
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return api.Status{}, fmt.Errorf("capsem ls --json: %v", err)
	}
	for _, s := range list {
		if s.Name == name {
			return s, nil
		}
	}
	return api.Status{}, fmt.Errorf("no sandbox %s in capsem ls", name)
}

// wantState fails unless name is in state.
func (b *bench) wantState(name, state string) error {
	s, err := b.status(name)
	if err != nil {
		return err
	}
	if s.State != state {
		return fmt.Errorf("sandbox %s is %s, want %s", name, s.State, state)
	}
	return nil
}

// rmAll removes every sandbox under the run's data directory, whatever
// state it is in, with a fresh context: it runs also after an interrupt.
// A sandbox whose start is still booting cannot be removed yet (its
// supervisor has written no run.json for rm to kill), so it tries again
// for a minute. It returns the names it could not remove.
func (b *bench) rmAll() (left []string) {
	entries, _ := os.ReadDir(filepath.Join(b.data, "sandboxes"))
	for _, e := range entries {
		if e.IsDir() {
			left = append(left, e.Name())
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var again []string
		for _, name := range left {
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			out, err := exec.CommandContext(ctx, b.capsem, "rm", "--force", "--data", b.data, name).CombinedOutput()
			cancel()
			if err != nil {
				progress("capsem rm --force %s: %v %s", name, err, strings.TrimSpace(string(out)))
				again = append(again, name)
			}
		}
		if left = again; len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(2 * time.Second)
	}
}

// leftovers lists the processes whose command line names the run's
// scratch directory (a QEMU or supervisor rm did not end).
func (b *bench) leftovers() []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		c, err := os.ReadFile(p)
		if err == nil && bytes.Contains(c, []byte(b.work)) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}
