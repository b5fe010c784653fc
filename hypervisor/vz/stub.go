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

// snapshotAPI says whether the framework binding can save and restore a
// VM here: not in this build (a VM's snapshot methods return ErrNotBuilt
// before they would look). A variable so that tests can say otherwise.
var snapshotAPI = false

// macOSVersion fails in this build.
func macOSVersion() (string, error) {
	return "", fmt.Errorf("vz: %w (this binary: %s/%s)", ErrNotBuilt, runtime.GOOS, runtime.GOARCH)
}
