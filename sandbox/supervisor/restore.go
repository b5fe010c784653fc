package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// pending is a saved guest a start resumes instead of booting.
type pending struct {
	dir  string
	meta api.Snapshot
}

// pendingRestore is the sandbox's suspended guest, checked against what
// this start would run; nil when there is none or o.Cold (which discards
// it).
func pendingRestore(d home.Dir, s home.Settings, o Options) (*pending, error) {
	_ = os.RemoveAll(home.PartialDir(d.SuspendDir())) // a suspend or fork that did not finish
	m, err := d.Suspended()
	if o.Cold || errors.Is(err, fs.ErrNotExist) {
		// --cold discards it; without a record, a suspend did not
		// finish and saved nothing whole.
		return nil, os.RemoveAll(d.SuspendDir())
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s has a saved guest whose record cannot be read (%w); capsem start --cold %s discards it and boots afresh", d.Name, err, d.Name)
	}
	var why string
	switch {
	case m.Image != s.Image:
		why = fmt.Sprintf("it runs guest image %s, the sandbox has %s", m.Image, s.Image)
	case m.Capsem != o.Host:
		why = fmt.Sprintf("it was saved by %s, this is %s", m.Capsem, o.Host)
	case m.CPUs != s.CPUs || m.MemoryMiB != s.MemoryMiB:
		why = fmt.Sprintf("it has %d CPUs and %d MiB, the sandbox's settings say %d and %d", m.CPUs, m.MemoryMiB, s.CPUs, s.MemoryMiB)
	}
	if why != "" {
		return nil, fmt.Errorf("sandbox %s has a saved guest this start cannot resume: %s; capsem start --cold %s discards it and boots afresh", d.Name, why, d.Name)
	}
	return &pending{dir: d.SuspendDir(), meta: m}, nil
}

// config is the sandbox's restore (nil for none).
func (p *pending) config() *sandbox.Restore {
	if p == nil {
		return nil
	}
	origin := p.meta.Origin
	if origin == "" {
		origin = fmt.Sprintf("suspended guest of session %s", p.meta.SessionID)
	}
	return &sandbox.Restore{
		Dir:    p.dir,
		Origin: origin,
		Saved:  sandbox.Saved{Machine: p.meta.Machine, Agent: p.meta.Agent, Ready: p.meta.Ready},
	}
}

// checkPlaceholders fails unless pol binds every secret whose placeholder
// the saved guest holds, with that placeholder: its programs send them.
func checkPlaceholders(pol *policy.Policy, keep map[string]string) error {
	have := pol.Placeholders()
	var missing []string
	for name, ph := range keep {
		if have[name] != ph {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return errors.New("the saved guest holds placeholders of secrets this start does not bind: " + fmt.Sprint(missing) +
		"; give them with --secret NAME[@HOST,…] (their real values from this environment), or --cold to boot afresh")
}
