package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
)

// ReadyFDEnv names the environment variable that tells a detached
// supervisor which inherited descriptor to report readiness on.
const ReadyFDEnv = "CAPSEM_READY_FD"

// Ready is what a supervisor reports once, as one JSON object: ready, or
// why not.
type Ready struct {
	OK      bool   `json:"ok,omitempty"`
	Error   string `json:"error,omitempty"`
	Running bool   `json:"running,omitempty"` // the error is that it already runs
	// Restoring: the guest could not be started from its saved state (a
	// resume, a fork, a new sandbox's boot snapshot); booting it cold may
	// work. Any other failure (a bad secret, a host port in use) would
	// fail a cold boot the same way.
	Restoring bool `json:"restoring,omitempty"`
}

// RestoreError is a start that failed restoring the guest from its saved
// state (Ready.Restoring): the caller may boot it cold instead.
type RestoreError struct{ Err error }

func (e RestoreError) Error() string { return e.Err.Error() }
func (e RestoreError) Unwrap() error { return e.Err }

// ReporterFromEnv is the report of a supervisor that Spawn started: it
// writes the Ready to the descriptor ReadyFDEnv names, and closes it. It
// unsets ReadyFDEnv, so that nothing the supervisor starts inherits it;
// without it the report goes nowhere (a supervisor run in place).
func ReporterFromEnv() func(Ready) {
	report := func(Ready) {}
	if fd := os.Getenv(ReadyFDEnv); fd != "" {
		var n int
		if _, err := fmt.Sscan(fd, &n); err == nil {
			f := os.NewFile(uintptr(n), "ready")
			report = func(m Ready) {
				_ = json.NewEncoder(f).Encode(m)
				f.Close()
			}
		}
		os.Unsetenv(ReadyFDEnv)
	}
	return report
}
