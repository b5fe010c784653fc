package mcpgate

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// reaped reports whether pid is gone or a zombie (killed, not yet reaped by
// whoever inherited it).
func reaped(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// A crashed server's children (npx's node, uvx's python) are killed with
// its group when it is restarted, though its leader was already gone.
func TestRestartKillsOrphans(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	srv := stdioServer("test", map[string]string{"PIDFILE": pidfile})
	// The child's stdio is not the server's: one holding the server's
	// stdout would hold the crashed call open until the guest gives up.
	srv.Command = []string{"/bin/sh", "-c", `sleep 313 </dev/null >/dev/null 2>&1 & echo $! > "$PIDFILE"; exec "$0"`, os.Args[0]}
	h := newHarness(t, decider{}, Config{}, srv)
	cs := h.connect(t, "test", nil)
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || reaped(child) {
		t.Fatalf("child pid %q: %v, or not running", b, err)
	}
	if _, err := callText(t, cs, "crash", nil); err == nil {
		t.Fatal("crash: no error")
	}
	if got, err := callText(t, cs, "echo", map[string]any{"text": "x"}); err != nil || got != "x" {
		t.Fatalf("echo after the crash = %q, %v", got, err)
	}
	if !eventually(3*time.Second, func() bool { return reaped(child) }) {
		t.Errorf("the crashed server's child %d still runs after the restart: its group was not killed", child)
	}
}

func TestBackoffDelay(t *testing.T) {
	for _, tc := range []struct {
		fails int
		want  time.Duration
		why   string
	}{
		{0, 0, "never failed"},
		{1, 0, "one crash costs the guest nothing: the next call starts it again"},
		{2, time.Second, "the second in a row waits the first backoff"},
		{3, 2 * time.Second, "doubling"},
		{7, 32 * time.Second, "still doubling"},
		{8, time.Minute, "capped at a minute, not 64 s"},
		{1000, time.Minute, "no overflow"},
	} {
		if got := backoffDelay(tc.fails); got != tc.want {
			t.Errorf("backoffDelay(%d) = %v, want %v: %s", tc.fails, got, tc.want, tc.why)
		}
	}
}

// A guest looping on a tool that crashes its server does not have capsem
// start a process per call: after the second death in a row calls are
// answered at once until the backoff has passed.
func TestRestartBackoff(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	for i := range 2 {
		if _, err := callText(t, cs, "crash", nil); err == nil {
			t.Fatalf("crash %d: no error", i)
		}
	}
	start := time.Now()
	_, err := callText(t, cs, "echo", map[string]any{"text": "x"})
	if err == nil || !strings.Contains(err.Error(), "keeps dying") || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("echo in the backoff: %v after %v, want the keeps-dying error at once", err, time.Since(start))
	}
	if p := h.pidOf("test"); p != 0 {
		t.Errorf("a process (pid %d) was started during the backoff", p)
	}
	if n := len(h.rec.calls(MethodServerRestarted)); n != 2 {
		t.Errorf("%d restart events, want 2 (one per death, not per call)", n)
	}
	if ev := h.rec.calls("tools/call"); !strings.Contains(ev[len(ev)-1].ErrorMessage, "keeps dying") || !strings.Contains(ev[len(ev)-1].ErrorMessage, "last: ") {
		t.Errorf("the refused call's event %+v does not record the backoff and how the server last ended", ev[len(ev)-1])
	}
	// How the server ended (its exit, its stderr tail) is the host's: a
	// guest crashing a server on purpose must not read what it said.
	if strings.Contains(err.Error(), "last: ") || strings.Contains(err.Error(), "exit status") {
		t.Errorf("the guest's error carries the host's detail: %v", err)
	}
	time.Sleep(time.Until(start.Add(backoffFirst + 100*time.Millisecond)))
	if got, err := callText(t, cs, "echo", map[string]any{"text": "x"}); err != nil || got != "x" {
		t.Errorf("echo after the backoff = %q, %v; want the restarted server's answer", got, err)
	}
}

// A server that fails to start is not tried on every call.
func TestStartFailureBackoff(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, Server{Name: "broken", Command: []string{"/nonexistent/capsem-mcp-server"}})
	ctx := context.Background()
	for _, tc := range []struct {
		want, why string
	}{
		{"starting MCP server", "the first failure is reported"},
		{"starting MCP server", "the second call tries again at once"},
		{"keeps dying", "the third is answered from the backoff, without a start"},
	} {
		h.post(t, ctx, "broken", "", initializeBody)
		ev := h.rec.calls("initialize")
		if got := ev[len(ev)-1].ErrorMessage; !strings.Contains(got, tc.want) {
			t.Errorf("initialize %d: error %q, want %q: %s", len(ev), got, tc.want, tc.why)
		}
	}
}

// stop does not wait behind a start for its whole timeout: it cancels it.
func TestStopCancelsStart(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	h := newHarness(t, decider{}, Config{}, Server{Name: "mute", Command: []string{"/bin/sh", "-c", "exec sleep 300"}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.post(t, context.Background(), "mute", "", initializeBody)
	}()
	time.Sleep(300 * time.Millisecond) // the start waits on the mute server
	start := time.Now()
	h.g.Apply(nil)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Apply took %v behind a start, want it cancelled (startTimeout is %v)", d, startTimeout)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the initialize POST did not end after its server was removed")
	}
}

type countHandler struct {
	mu    sync.Mutex
	lines int
}

func (c *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c *countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "mcpgate: MCP server stderr" {
		c.mu.Lock()
		c.lines++
		c.mu.Unlock()
	}
	return nil
}
func (c *countHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countHandler) WithGroup(string) slog.Handler      { return c }

// The stderr log budget is the backend's, not each process's: a server
// restarted in a loop must not log a budget per start.
func TestStderrBudgetAcrossProcesses(t *testing.T) {
	ch := &countHandler{}
	log := slog.New(ch)
	budget := &stderrBudget{}
	line := strings.Repeat("x", stderrLineCap-1) + "\n"
	perBudget := stderrLogBudget / (stderrLineCap - 1)
	first := newStderrLog(log, "s", budget)
	for range perBudget + 10 {
		first.Write([]byte(line))
	}
	before := ch.lines
	second := newStderrLog(log, "s", budget) // the restarted process
	second.Write([]byte("after the restart\n"))
	if ch.lines != before {
		t.Errorf("the restarted process logged %d lines past its backend's spent budget", ch.lines-before)
	}
	if before < perBudget || before > perBudget+1 {
		t.Errorf("%d lines logged, want about %d (the budget)", before, perBudget)
	}
}
