package mcpgate

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

const (
	// stderrLineCap caps one logged line of a server's stderr.
	stderrLineCap = 1024
	// stderrLogBudget is how much of one backend's stderr is logged, over
	// all its processes: a chatty server (some log every request), or one
	// restarted in a loop, must not fill capsem's log.
	stderrLogBudget = 64 << 10
	// stderrTailCap is how much of the end of stderr a restart's
	// error_message quotes: the panic or error line a crash ends with.
	stderrTailCap = 512
)

// stderrBudget is what a backend's processes have logged of their stderr,
// against stderrLogBudget.
type stderrBudget struct {
	mu      sync.Mutex
	logged  int
	dropped bool
}

// stderrLog logs a process's stderr line by line, within its backend's
// budget, and keeps its tail.
type stderrLog struct {
	log    *slog.Logger
	name   string
	budget *stderrBudget

	mu   sync.Mutex
	line []byte
	last []byte
}

// newStderrLog logs within budget; nil: a budget of its own.
func newStderrLog(log *slog.Logger, name string, budget *stderrBudget) *stderrLog {
	if budget == nil {
		budget = &stderrBudget{}
	}
	return &stderrLog{log: log, name: name, budget: budget}
}

// Write always accepts all of p.
func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = append(s.last, p...)
	if len(s.last) > stderrTailCap {
		s.last = append(s.last[:0], s.last[len(s.last)-stderrTailCap:]...)
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
			rest = rest[i+1:]
		} else {
			rest = nil
		}
		if room := stderrLineCap - len(s.line); room > 0 {
			s.line = append(s.line, chunk[:min(room, len(chunk))]...)
		}
		if i >= 0 {
			s.emit()
		}
	}
	return len(p), nil
}

func (s *stderrLog) emit() {
	n := len(s.line)
	b := s.budget
	b.mu.Lock()
	over, warn := b.logged >= stderrLogBudget, false
	if over {
		warn, b.dropped = !b.dropped, true
	} else {
		b.logged += n
	}
	b.mu.Unlock()
	// The line becomes a string only when it is logged: a chatty server
	// past its budget costs no allocation per line.
	var line string
	if !over {
		line = string(s.line)
	}
	s.line = s.line[:0]
	if over {
		if warn {
			s.log.Warn("mcpgate: MCP server's stderr is over its log budget; the rest is not logged", "server", s.name, "budget", stderrLogBudget)
		}
		return
	}
	s.log.Info("mcpgate: MCP server stderr", "server", s.name, "line", line)
}

// tail is the end of what the server wrote, on one line.
func (s *stderrLog) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := strings.TrimSpace(strings.ToValidUTF8(string(s.last), ""))
	return strings.Join(strings.Fields(strings.ReplaceAll(t, "\n", " | ")), " ")
}
