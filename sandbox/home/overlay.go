package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/capsem/capsem/policy"
)

// Overlay is a sandbox's policy-asked.toml: what a person answered
// "always" when capsem asked (policy.ParseOverlay draws its format). The
// supervisor's filter keeps answers in it and lays it over the policy at
// every start and reload; capsem ls and --dry-run show it.
type Overlay struct {
	Path    string
	Sandbox string // the sandbox's name, in the file's header
}

// Overlay is d's overlay.
func (d Dir) Overlay() Overlay { return Overlay{Path: d.OverlayPath(), Sandbox: d.Name} }

// Grants reads what the overlay allows; no file allows nothing.
func (o Overlay) Grants() (policy.Grants, error) {
	data, err := os.ReadFile(o.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return policy.Grants{}, nil
	}
	if err != nil {
		return policy.Grants{}, fmt.Errorf("home: the overlay of asked answers: %w", err)
	}
	return policy.ParseOverlay(o.Path, data)
}

// Keep adds g to the overlay: a reader sees the file before or after,
// never half of it.
func (o Overlay) Keep(g policy.Grants) error {
	kept, err := o.Grants()
	if err != nil {
		return err
	}
	data, err := policy.FormatOverlay(o.Sandbox, kept.Union(g))
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(o.Path, data, 0o600); err != nil {
		return fmt.Errorf("home: the answer is not kept in %s: %w", o.Path, err)
	}
	return nil
}
