package filter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/policy"
)

// Asks is the broker the guest's unforeseen names, ports and tools are
// asked through ([network] unknown = "ask"): the API lists and answers
// its questions.
func (f *Filter) Asks() *ask.Broker { return f.asks }

// grant lays an answer of "session" or "always" over the policy in force
// (ask.Config.Grant); "always" is written to the overlay file first.
func (f *Filter) grant(q ask.Question, answer string) error {
	f.grantMu.Lock()
	defer f.grantMu.Unlock()
	g := q.Grants()
	if answer == ask.Always {
		if f.overlay == "" {
			return errors.New("filter: only a sandbox keeps \"always\" answers (capsem start NAME); answer \"session\" or \"once\"")
		}
		kept, err := readOverlay(f.overlay)
		if err != nil {
			return err
		}
		data, err := policy.FormatOverlay(f.sandbox, kept.Union(g))
		if err != nil {
			return err
		}
		if err := writeFileAtomic(f.overlay, data); err != nil {
			return fmt.Errorf("filter: the answer is not kept: %w", err)
		}
	} else {
		f.session = f.session.Union(g)
	}
	p, err := f.lay(f.file)
	if err != nil {
		return err
	}
	f.apply(p)
	return nil
}

// lay returns p with the overlay's and the session's grants laid over it.
func (f *Filter) lay(p *policy.Policy) (*policy.Policy, error) {
	g := f.session
	if f.overlay != "" {
		kept, err := readOverlay(f.overlay)
		if err != nil {
			return nil, err
		}
		g = kept.Union(g)
	}
	if g.Empty() {
		return p, nil
	}
	laid, err := p.WithGrants(g)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s or this session's answers; fix or remove the entry)", err, f.overlay)
	}
	return laid, nil
}

// readOverlay reads the overlay file at path; none is no grants.
func readOverlay(path string) (policy.Grants, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return policy.Grants{}, nil
	}
	if err != nil {
		return policy.Grants{}, fmt.Errorf("filter: the overlay of asked answers: %w", err)
	}
	return policy.ParseOverlay(path, data)
}

// ReadOverlay is what the overlay file at path allows ("" or no file:
// nothing), for capsem ls and --dry-run.
func ReadOverlay(path string) (policy.Grants, error) {
	if path == "" {
		return policy.Grants{}, nil
	}
	return readOverlay(path)
}

// writeFileAtomic replaces path with data: a reader (a start, a reload)
// sees the old file or the new one, never half of one.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
