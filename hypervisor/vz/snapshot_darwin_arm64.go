//go:build darwin && vz && arm64

package vz

// The framework binding (github.com/Code-Hex/vz/v3 v3.7.1) has
// SaveMachineStateToPath and RestoreMachineStateFromURL only on arm64
// (its virtualization_arm64.go); both check for macOS 14 themselves
// (ErrUnsupportedOSVersion), and for a configuration the framework can
// save (VZVirtualMachineConfiguration validateSaveRestoreSupport), before
// they call it.

// snapshotAPI: this build can save and restore.
var snapshotAPI = true

// saveState writes the paused VM's state to path (saveMachineStateToURL).
func (m *vzMachine) saveState(path string) error {
	return m.vm.SaveMachineStateToPath(path)
}

// restoreState loads path into the stopped, never started VM
// (restoreMachineStateFromURL); the framework leaves it paused.
func (m *vzMachine) restoreState(path string) error {
	return m.vm.RestoreMachineStateFromURL(path)
}
