package filter

import (
	"github.com/capsem/capsem/mitm"
	"github.com/capsem/capsem/policy"
)

// SetPolicy swaps the policy: flows, queries and requests that start after
// the call see the new one, with the overlay's and this session's asked
// answers laid over it; those under way keep theirs. A gateway server the
// new policy removes or changes is stopped. An overlay that cannot be read
// keeps the policy in force, and the error says why.
func (f *Filter) SetPolicy(p *policy.Policy) error {
	f.grantMu.Lock()
	defer f.grantMu.Unlock()
	laid, err := f.lay(p)
	if err != nil {
		return err
	}
	f.file = p
	f.apply(laid)
	return nil
}

// apply puts p in force.
func (f *Filter) apply(p *policy.Policy) {
	f.stack.SetPolicy(p)
	f.gateway.ApplyPolicy(p)
}

// Policy is the policy new flows see.
func (f *Filter) Policy() *policy.Policy { return f.stack.Policy() }

// Reload reads the policy file at path, binds its secrets keeping the
// placeholders the guest holds, and puts it in force (SetPolicy). A broken
// file or a secret without its real value keeps the previous policy — fail
// closed, never open — and returns the error.
func (f *Filter) Reload(path string) (*policy.Policy, error) {
	p, err := LoadPolicy(path, f.Policy().Placeholders())
	if err != nil {
		return nil, err
	}
	if err := f.SetPolicy(p); err != nil {
		return nil, err
	}
	return f.Policy(), nil
}

// LoadPolicy reads the policy file at path and binds its secrets: real
// values from this process's environment and files, placeholders kept from
// keep (nil: made anew).
func LoadPolicy(path string, keep map[string]string) (*policy.Policy, error) {
	p, err := policy.Load(path)
	if err != nil {
		return nil, err
	}
	return mitm.BindSecrets(p, keep, nil)
}
