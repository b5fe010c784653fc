package image

import (
	"fmt"

	"github.com/capsem/capsem/guest/arch"
)

// Target is what one architecture's default guest is built from: its
// kernel pin, the modules its /init loads, and its root filesystem's
// recipe. Everything else — the agent's source, the initramfs layout, the
// hardening and the checks — is the same for every architecture.
type Target struct {
	Arch   arch.Arch
	Kernel KernelOptions
	Rootfs RootfsRecipe
}

// TargetFor is architecture a's default guest ("" is the host's).
func TargetFor(a arch.Arch) (Target, error) {
	if a == "" {
		a = arch.Host()
	}
	switch a {
	case arch.AMD64:
		return Target{Arch: a, Kernel: KernelOptions{Package: DefaultKernel, Modules: DefaultModules}, Rootfs: DefaultRootfs}, nil
	case arch.ARM64:
		return Target{
			Arch:   a,
			Kernel: KernelOptions{Package: DefaultKernelARM64, Modules: DefaultModulesARM64},
			Rootfs: DefaultRootfs.ForArch(arch.ARM64),
		}, nil
	}
	return Target{}, fmt.Errorf("image: no guest is built for %q: want %s or %s", a, arch.AMD64, arch.ARM64)
}
