package tests

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A guest whose root stops the agent (the only reader of the control
// channel) leaves the host nobody to tell anything, and capsem run
// --timeout, Ctrl-C and capsem stop must not wait on it for ever (only
// SIGKILL would end them): a signal the agent does not confirm, or a stop
// it does not answer, stops the guest within seconds, and the record says
// the agent went silent.

// deafCommand says so on stderr, stops the agent from inside the guest a
// second later (the line has reached the host by then), and waits. The
// pattern does not match the shell's own command line, which begins "sh".
const deafCommand = `echo stopping-the-agent >&2; sleep 1; kill -STOP $(pgrep -f '^[^ ]*capsem-agent serve') && sleep 600`

// lineAt returns a runOpts.onLine that notes when a line of capsem run's
// stderr holds mark (and then calls then, if set, in a goroutine), and a
// func that gives that time.
func lineAt(mark string, then func()) (func(string), func() time.Time) {
	var mu sync.Mutex
	var at time.Time
	return func(line string) {
			if !strings.Contains(line, mark) {
				return
			}
			mu.Lock()
			at = time.Now()
			mu.Unlock()
			if then != nil {
				go then()
			}
		}, func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return at
		}
}

// The timeout is 5 s, not less, so that the command has surely stopped the
// agent when it runs out, even on a loaded machine under TCG (at 2 s it
// once had not: the KILL was delivered and the test proved nothing).
func TestRunDeafGuestTimeout(t *testing.T) {
	needGuest(t)
	data := t.TempDir()
	const timeout = 5 * time.Second
	onLine, ready := lineAt(`msg="guest ready"`, nil)
	r := capsemRun(t, runOpts{data: data, onLine: onLine}, []string{"--timeout", timeout.String(), "--log-level", "debug"}, "sh", "-c", deafCommand)
	ended := time.Now()
	if ready().IsZero() {
		t.Fatalf("no guest ready line in capsem run's debug log\nstderr:\n%s", r.stderr)
	}
	if r.code == 124 {
		t.Fatalf("the command was killed before it had stopped the agent: the guest was too slow for this test\nstderr:\n%s", r.stderr)
	}
	// From the guest being ready: the command starts, runs 5 s, is sent
	// KILL, whose confirmation the silent agent does not give within 1 s;
	// the VM is stopped and the session recorded.
	after := ended.Sub(ready()) - timeout
	t.Logf("capsem run ended %v after its --timeout %v", after.Round(time.Millisecond), timeout)
	if r.code == 0 || !strings.Contains(r.stderr, "did not confirm signal KILL") {
		t.Fatalf("exit %d, want a failure that says the guest did not confirm the KILL\nstderr:\n%s", r.code, r.stderr)
	}
	if after > 6*time.Second {
		t.Errorf("capsem run took %v past its --timeout against a guest that does not read; want ~5 s at most", after)
	}
	db := exportRun(t, data, r.session)
	if got := queryStrings(t, db, `SELECT state FROM agent_events`); !strings.Contains(strings.Join(got, " "), "silent") {
		t.Errorf("agent_events = %q: the silent agent is not on record", got)
	}
}

func TestRunDeafGuestCtrlC(t *testing.T) {
	needGuest(t)
	var mu sync.Mutex
	var pid int
	var sent time.Time
	onLine, _ := lineAt("stopping-the-agent", func() {
		time.Sleep(3 * time.Second) // the command has stopped the agent by then (1 s)
		mu.Lock()
		defer mu.Unlock()
		sent = time.Now()
		_ = syscall.Kill(pid, syscall.SIGINT)
	})
	r := capsemRun(t, runOpts{onLine: onLine, onStart: func(p int) { mu.Lock(); pid = p; mu.Unlock() }}, nil, "sh", "-c", deafCommand)
	ended := time.Now()
	mu.Lock()
	defer mu.Unlock()
	if sent.IsZero() {
		t.Fatalf("capsem run ended before the Ctrl-C: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	t.Logf("capsem run ended %v after one Ctrl-C", ended.Sub(sent).Round(time.Millisecond))
	if r.code == 0 || !strings.Contains(r.stderr, "did not confirm signal INT") {
		t.Fatalf("exit %d, want a failure that says the guest did not confirm the INT\nstderr:\n%s", r.code, r.stderr)
	}
	if took := ended.Sub(sent); took > 5*time.Second {
		t.Errorf("capsem run took %v after Ctrl-C against a guest that does not read; want 5 s at most", took)
	}
}

// capsem exec --timeout gives up on a command its guest does not end, and
// capsem stop stops a sandbox whose guest does not read within 5 s.
func TestSandboxDeafGuestStop(t *testing.T) {
	e := newSBEnv(t)
	e.start("deaf")
	r := e.exec("deaf", []string{"--timeout", "5s"}, nil, "sh", "-c", deafCommand)
	t.Logf("capsem exec --timeout 5s: exit %d in %v", r.code, r.took.Round(time.Millisecond))
	if r.code == 0 || !strings.Contains(r.stderr, "did not end within") {
		t.Errorf("capsem exec: exit %d, want a failure that says the command did not end\nstderr:\n%s", r.code, r.stderr)
	}
	if r.took > 20*time.Second {
		t.Errorf("capsem exec --timeout 5s took %v against a guest that does not read (5 s, then 5 s after KILL)", r.took)
	}
	st := e.must(0, nil, "stop", "deaf")
	t.Logf("capsem stop: %v", st.took.Round(time.Millisecond))
	if st.took > 5*time.Second {
		t.Errorf("capsem stop took %v against a guest that does not read; want 5 s at most", st.took)
	}
	if got := e.state("deaf"); got != "stopped" {
		t.Errorf("state after stop: %s", got)
	}
	if pids := qemuOf(e.data); len(pids) > 0 {
		t.Errorf("QEMU still runs after the stop: %v", pids)
	}
}
