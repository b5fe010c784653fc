package qemu

import (
	"github.com/capsem/capsem/guest/arch"
)

// target is what differs between the machines the backend emulates for
// each guest architecture. The guest is the same otherwise: the same boot
// parameters, devices in the same order, the same control port name.
type target struct {
	arch arch.Arch
	// machine is -M's value. amd64: microvm (no PCI, no firmware beyond
	// qboot, virtio-mmio devices described by ACPI). arm64: virt, which
	// boots an Image with -kernel and no firmware (QEMU's own boot code
	// and a generated device tree); its devices go on PCI, as the
	// Virtualization framework's do, so that one module list
	// (image.DefaultModulesARM64) serves both backends.
	machine string
	// bus is the virtio transport's device-name suffix: "device"
	// (virtio-mmio: virtio-blk-device) or "pci" (virtio-blk-pci).
	bus string
	// console is the serial console the guest writes to (console=): the
	// 8250 on microvm, the PL011 on virt.
	console string
}

// targetFor is a's machine; ok is false for an architecture the backend
// does not emulate.
func targetFor(a arch.Arch) (target, bool) {
	switch a {
	case arch.AMD64:
		return target{arch: a, machine: "microvm", bus: "device", console: "ttyS0"}, true
	case arch.ARM64:
		return target{arch: a, machine: "virt", bus: "pci", console: "ttyAMA0"}, true
	}
	return target{}, false
}

// virtio is the virtio device name for kind on t's transport
// (virtio-blk-device, virtio-blk-pci).
func (t target) virtio(kind string) string { return "virtio-" + kind + "-" + t.bus }

// cpu is -cpu's value under accel.
func (t target) cpu(a Accel) string {
	if a.KVM() {
		return "host"
	}
	if t.arch == arch.ARM64 {
		// Every feature TCG emulates, with the implementation-defined
		// pointer-authentication algorithm: QARMA5, the architected one,
		// is the slowest thing in an emulated arm64 guest (every function
		// entry and return signs or checks a pointer).
		return "max,pauth-impdef=on"
	}
	// Every feature TCG emulates (rdrand for random.trust_cpu, SSE4 and
	// AVX for guest programs built for x86-64-v2+), not qemu64's 2003 set.
	return "max"
}
