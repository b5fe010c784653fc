package hypervisor

import (
	"errors"
	"fmt"
	"os"
)

// Restore is a snapshot to start a VM from (Config.Restore): the device
// state a backend saved and the guest RAM beside it.
type Restore struct {
	// State is the file of the saved device state (QEMU's migration
	// stream without RAM).
	State string
	// RAM is the saved guest RAM: a sparse file, or a RAM image
	// (Compressed).
	RAM string
	// Compressed: RAM is a RAM image (SaveRAMImage), expanded into
	// Config.RAMFile; it cannot be Private.
	Compressed bool
	// Private maps RAM copy-on-write (MAP_PRIVATE) instead of copying it
	// into Config.RAMFile: restores of one snapshot then share its page
	// cache and start without a copy, but such a VM cannot be
	// snapshotted again (its RAM is no longer a shared file). False,
	// under qemu: RAM is copied into Config.RAMFile, which must be set.
	Private bool
	// Machine is what the saving VM said it was (its backend's
	// Machine()): a restore into another machine — another QEMU version,
	// accelerator, CPU model, vCPU count, memory size or device set — is
	// refused before any state is loaded.
	Machine string
}

// check validates r against the rest of c.
func (r *Restore) check(c *Config) error {
	if r.State == "" || r.RAM == "" {
		return errors.New("hypervisor: a restore needs the saved state and RAM files")
	}
	if r.Private && r.Compressed {
		return errors.New("hypervisor: a compressed RAM image cannot be mapped copy-on-write (Private): it must be expanded")
	}
	for _, p := range []string{r.State, r.RAM} {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("hypervisor: snapshot: %w", err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("hypervisor: snapshot file %s is not a regular file", p)
		}
	}
	return nil
}
