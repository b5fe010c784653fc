//go:build darwin && vz && !arm64

package vz

import "errors"

// The framework binding (github.com/Code-Hex/vz/v3 v3.7.1) saves and
// restores only on arm64: on an Intel Mac canSnapshot refuses before
// these are reached.

// snapshotAPI: this build cannot save or restore.
var snapshotAPI = false

var errNoSnapshotAPI = errors.New("the framework binding saves and restores only on arm64")

func (m *vzMachine) saveState(string) error    { return errNoSnapshotAPI }
func (m *vzMachine) restoreState(string) error { return errNoSnapshotAPI }
