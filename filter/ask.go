package filter

import (
	"errors"
	"fmt"

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
	if answer == ask.Always && f.overlay == nil {
		return errors.New("filter: only a sandbox keeps \"always\" answers (capsem start NAME); answer \"session\" or \"once\"")
	}
	// The grant is checked against the policy before it is kept anywhere.
	if _, err := f.Policy().WithGrants(g); err != nil {
		return err
	}
	if answer == ask.Always {
		if err := f.overlay.Keep(g); err != nil {
			return err
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
	if f.overlay != nil {
		kept, err := f.overlay.Grants()
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
		return nil, fmt.Errorf("%w (in the overlay of asked answers or this session's; fix or remove the entry, then capsem policy reload)", err)
	}
	return laid, nil
}

// Overlay keeps a sandbox's "always" answers (sandbox/home.Overlay is
// one).
type Overlay interface {
	// Grants reads what it allows.
	Grants() (policy.Grants, error)
	// Keep adds g.
	Keep(g policy.Grants) error
}
