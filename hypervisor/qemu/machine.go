package qemu

import (
	"fmt"
	"strings"

	"github.com/capsem/capsem/hypervisor"
)

// machine names what a saved state can only be loaded into: the QEMU
// version, the accelerator and CPU model, the vCPUs and memory, and the
// devices in the order they are attached (virtio-mmio slots are handed out
// in that order; a device more or less moves every one after it). Paths
// are not in it: a restore may attach another copy of the data disk or
// another workspace. Stability: saved in snapshots and compared as a
// string; any change to it makes earlier snapshots refused (which is the
// point when what it describes changed).
func machine(cfg *hypervisor.Config, t target, accel Accel, version string) string {
	devs := []string{"serial", "control"}
	if cfg.NIC != nil {
		devs = append(devs, "net")
	}
	if cfg.RootImage != "" {
		devs = append(devs, "root")
	}
	if cfg.DataDisk != "" {
		devs = append(devs, "data")
	}
	if cfg.TransferDisk != "" {
		devs = append(devs, "transfer")
	}
	if cfg.Workspace != "" {
		devs = append(devs, "9p")
	}
	return fmt.Sprintf("qemu %s %s accel=%s cpu=%s smp=%d mem=%dM devices=%s",
		version, t.machine, accel.Name, t.cpu(accel), cfg.CPUs, cfg.MemoryMiB, strings.Join(devs, ","))
}
