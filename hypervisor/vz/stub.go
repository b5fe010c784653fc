//go:build !(darwin && vz)

package vz

import (
	"fmt"
	"runtime"

	"github.com/capsem/capsem/hypervisor"
)

// New fails in this build: the framework needs macOS, cgo and -tags vz.
// The error wraps ErrNotBuilt.
func New(hypervisor.Config, Options) (*VM, error) {
	return nil, fmt.Errorf("vz: %w (this binary: %s/%s)", ErrNotBuilt, runtime.GOOS, runtime.GOARCH)
}
