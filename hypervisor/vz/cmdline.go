package vz

import (
	"strings"

	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

// kernelCmdline is the guest kernel's command line (see the package
// documentation for the order and why).
func kernelCmdline(cfg *hypervisor.Config, port uint32) string {
	// No tsc_early_khz: that is for x86 TCG; vz runs on hardware
	// virtualisation. console=ttyS0 from the base stays harmless (there is
	// no 8250 under vz); the last console= is /dev/console.
	w := hypervisor.BaseCmdline(0)
	w = append(w, "console=hvc0")
	p := cfg.Boot
	w = append(w, hypervisor.DiskBoot(cfg, &p)...)
	w = append(w, cfg.Cmdline...)
	// The control channel on vsock instead of the virtio-serial port, and
	// the workspace over virtio-fs under the tag it is shared with (the
	// guest's default, so a tag from Config.Boot cannot make it mount
	// another).
	p.Vsock = port
	if cfg.Workspace != "" {
		p.WSFS = "virtiofs"
		p.WSTag = bootparam.WorkspaceTag
	}
	w = append(w, p.String())
	return strings.Join(w, " ")
}
