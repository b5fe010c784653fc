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
	// stderrLogBudget is how much of one process's stderr is logged: a
	// chatty server (some log every request) must not fill capsem's log.
	stderrLogBudget = 64 << 10
	// stderrTailCap is how much of the end of stderr a restart's
	// error_message quotes: the panic or error line a crash ends with.
	stderrTailCap = 512
)

// stderrLog logs a server's stderr line by line, within a budget, and keeps
// its tail.
type stderrLog struct {
	log  *slog.Logger
	name string

	mu      sync.Mutex
	line    []byte
	logged  int
	dropped bool
	last    []byte
}

func newStderrLog(log *slog.Logger, name string) *stderrLog {
	return &stderrLog{log: log, name: name}
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
	line := string(s.line)
	s.line = s.line[:0]
	if s.logged >= stderrLogBudget {
		if !s.dropped {
			s.dropped = true
			s.log.Warn("mcpgate: MCP server's stderr is over its log budget; the rest is not logged", "server", s.name, "budget", stderrLogBudget)
		}
		return
	}
	s.logged += len(line)
	s.log.Info("mcpgate: MCP server stderr", "server", s.name, "line", line)
}

// tail is the end of what the server wrote, on one line.
func (s *stderrLog) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := strings.TrimSpace(strings.ToValidUTF8(string(s.last), ""))
	return strings.Join(strings.Fields(strings.ReplaceAll(t, "\n", " | ")), " ")
}
