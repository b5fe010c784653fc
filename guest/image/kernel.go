package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capsem/capsem/guest/arch"
)

// KernelPackage pins one Debian kernel package by name, version and
// checksum.
type KernelPackage struct {
	Package string // apt package name
	Version string // exact Debian version
	SHA256  string // of the .deb, as apt-cache show prints it
	Release string // uname -r: the /lib/modules directory inside
	// Arch is the architecture the package is built for; "" is amd64 (the
	// pins made before arm64 existed).
	Arch arch.Arch
}

// arch is k's architecture, amd64 for "".
func (k KernelPackage) arch() arch.Arch { return arch.Recorded(k.Arch) }

// DefaultKernel is the guest kernel capsem pins: Debian 12's generic
// (non-cloud) amd64 kernel, because only it builds 9p (the workspace
// share). Its bzImage payload is xz with the x86 BCJ filter. virtio,
// virtio_ring and virtio_mmio are modules in it, and it has no
// CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES: microvm's devices are found through
// ACPI once virtio_mmio is loaded.
//
// Bump it with: apt-get update; apt-cache policy linux-image-amd64 (the
// candidate's Depends names the ABI package); apt-cache show
// <package>=<version> | grep SHA256. This is the pin's one home: the
// Taskfile's deps task reads it through tools/kernelpin, the boot tests
// through this variable.
var DefaultKernel = KernelPackage{
	Package: "linux-image-6.1.0-56-amd64",
	Version: "6.1.192-2",
	SHA256:  "a86e2049672f52354c4536a089203b6c82639420424d31c91cf31a181fd4d8f1",
	Release: "6.1.0-56-amd64",
}

// DefaultKernelARM64 is the arm64 guest's kernel: the same Debian 12
// release as DefaultKernel, built for arm64. Its vmlinuz is an uncompressed
// arm64 Image (with an EFI stub), what the Virtualization framework's Linux
// boot loader and QEMU's -M virt take as they are. virtio_pci, 9p, virtiofs
// and vsock are modules in it; the PL011 UART and the generic PCI host are
// built in. Bump it beside DefaultKernel (apt-cache show
// <package>:arm64=<version>, after dpkg --add-architecture arm64 and
// apt-get update).
var DefaultKernelARM64 = KernelPackage{
	Package: "linux-image-6.1.0-56-arm64",
	Version: "6.1.192-2",
	SHA256:  "6f4ed2d1cb9106bc977c2b1960008f175e2eed5740340634b7894e65ef5acc82",
	Release: "6.1.0-56-arm64",
	Arch:    arch.ARM64,
}

// DefaultModules are the modules the guest loads, by name; their
// dependencies (from each module's .modinfo) are added and ordered
// automatically: the virtio-mmio transport, the control port, the NIC,
// the root disk, the 9p workspace, overlayfs for a writable root over the
// read-only image, and both read-only image formats.
var DefaultModules = []string{
	"virtio_mmio",
	"virtio_console",
	"virtio_net",
	"virtio_blk",
	"9pnet_virtio",
	"9p",
	"overlay",
	"erofs",
	"squashfs",
}

// DefaultModulesARM64 are the arm64 guest's modules: virtio over PCI
// rather than MMIO (both QEMU's virt machine, as capsem configures it, and
// the Virtualization framework put their devices on PCI), and what the vz
// backend uses besides DefaultModules' devices: the workspace over
// virtio-fs and the control channel over vsock.
var DefaultModulesARM64 = []string{
	"virtio_pci",
	"virtio_console",
	"virtio_net",
	"virtio_blk",
	"9pnet_virtio",
	"9p",
	"virtiofs",
	"vmw_vsock_virtio_transport",
	"overlay",
	"erofs",
	"squashfs",
}

// RWModules are the modules a long-lived sandbox's writable disk needs
// besides DefaultModules: ext4 (with jbd2, mbcache, crc16 and crc32c). The
// guest loads them only when it has such a disk (bootparam.RWModuleOrder):
// measured, they add ~150 ms to the module loading of every boot under TCG.
var RWModules = []string{"ext4"}

// DebFile is the file name apt-get download gives the package.
func (k KernelPackage) DebFile() string {
	return k.Package + "_" + strings.ReplaceAll(k.Version, ":", "%3a") + "_" + k.arch().String() + ".deb"
}

// String is the package as apt-get names it: package=version, with
// :arch for an architecture other than amd64 (package:arm64=version).
func (k KernelPackage) String() string {
	if k.arch() != arch.AMD64 {
		return k.Package + ":" + k.arch().String() + "=" + k.Version
	}
	return k.Package + "=" + k.Version
}

// FetchKernelDeb returns the path of the pinned kernel package in the
// downloads cache, fetching it with apt-get download (no root needed, the
// host's apt sources and keys vouch for it) when it is not there, and
// checking its SHA-256 either way.
func (c *Cache) FetchKernelDeb(ctx context.Context, k KernelPackage) (string, error) {
	dir := c.Downloads()
	dst := filepath.Join(dir, k.DebFile())
	if err := checkSHA256(dst, k.SHA256); err == nil {
		return dst, nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return "", fmt.Errorf("fetch %s: apt-get not found: the guest kernel comes from Debian's archive; on a host without apt, download %s and pass it as the kernel .deb", k, k.DebFile())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("fetch %s: %w", k, err)
	}
	tmp, err := os.MkdirTemp(dir, ".fetch-")
	if err != nil {
		return "", fmt.Errorf("fetch %s: %w", k, err)
	}
	defer os.RemoveAll(tmp)
	// apt-get warns when root downloads into a directory its _apt user
	// cannot write; the download itself works.
	cmd := exec.CommandContext(ctx, apt, "download", "-q", k.String())
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		fix := "run apt-get update; if the version is gone from the archive, bump image.DefaultKernel"
		if k.arch() != arch.AMD64 {
			fix = fmt.Sprintf("apt needs %s package lists: dpkg --add-architecture %s && apt-get update (go tool task deps:%s does it); if the version is gone from the archive, bump image.DefaultKernel%s",
				k.arch(), k.arch(), k.arch(), strings.ToUpper(k.arch().String()))
		}
		return "", fmt.Errorf("fetch %s: apt-get download: %w: %s\n(%s)", k, err, strings.TrimSpace(string(out)), fix)
	}
	got := filepath.Join(tmp, k.DebFile())
	if err := checkSHA256(got, k.SHA256); err != nil {
		return "", fmt.Errorf("fetch %s: %w", k, err)
	}
	if err := os.Rename(got, dst); err != nil {
		return "", fmt.Errorf("fetch %s: %w", k, err)
	}
	return dst, nil
}

func checkSHA256(p, want string) error {
	got, err := fileSHA256(p)
	if err != nil {
		return err
	}
	if want != "" && !strings.EqualFold(got, want) {
		return fmt.Errorf("%s: SHA-256 %s, want %s", p, got, want)
	}
	return nil
}

// Kernel is a guest kernel ready to boot — amd64's PVH vmlinux or arm64's
// Image — and the modules the guest needs, in load order, in one cache
// directory.
type Kernel struct {
	Dir     string `json:"-"`
	Package string `json:"package"`
	Release string `json:"release"`
	// Arch is the kernel's architecture; "" (a manifest written before
	// arm64) is amd64.
	Arch        arch.Arch `json:"arch,omitempty"`
	DebSHA256   string    `json:"deb_sha256"`
	Compression string    `json:"compression"` // of the bzImage payload; "" for an arm64 Image
	PVHEntry    uint32    `json:"pvh_entry"`   // 0 for an arm64 Image
	Modules     []string  `json:"modules"`     // load order, dependencies first
	// RWModules are the RWModules and their dependencies not in Modules,
	// in load order (after Modules).
	RWModules []string `json:"rw_modules,omitempty"`
}

// BootFileName is the name of the file a hypervisor boots, for a kernel of
// architecture a: amd64's ELF vmlinux, arm64's Image.
func BootFileName(a arch.Arch) string {
	if a == arch.ARM64 {
		return "Image"
	}
	return "vmlinux"
}

// Boot is the path of the file a hypervisor boots (BootFileName).
func (k *Kernel) Boot() string { return filepath.Join(k.Dir, BootFileName(k.arch())) }

// arch is the kernel's architecture, amd64 for "".
func (k *Kernel) arch() arch.Arch { return arch.Recorded(k.Arch) }

// Config is the path of the kernel's build configuration.
func (k *Kernel) Config() string { return filepath.Join(k.Dir, "config") }

// ModulePath is the path of module name (uncompressed .ko).
func (k *Kernel) ModulePath(name string) string {
	return filepath.Join(k.Dir, "modules", name+".ko")
}

// kernelFormat changes whenever PrepareKernel's output changes for the
// same inputs, so old cache entries are not reused.
const kernelFormat = "capsem-kernel-3"

// KernelOptions select a kernel; the zero value is DefaultKernel with
// DefaultModules, fetched with apt-get (TargetFor gives another
// architecture's).
type KernelOptions struct {
	Package KernelPackage
	Modules []string
	// Deb is a local copy of the package (no apt-get); its SHA-256 must
	// match Package.SHA256 when that is set.
	Deb string
}

// PrepareKernel returns the cached kernel for opts, building it first if
// needed: fetch the .deb, unpack it, extract vmlinux from the bzImage,
// collect the wanted modules and their dependencies (uncompressed), and
// write a manifest. ~5 s on two cores the first time, instant after; a
// cached kernel is found by its pinned checksum without running apt-get.
func (c *Cache) PrepareKernel(ctx context.Context, opts KernelOptions) (*Kernel, error) {
	k, _, err := c.prepareKernel(ctx, opts, false)
	return k, err
}

// kernelPlan is a kernel's resolved options and cache key.
type kernelPlan struct {
	pkg    KernelPackage
	mods   []string
	deb    string // local .deb, or "" to fetch
	debSum string
	key    string
}

func planKernel(opts KernelOptions) (kernelPlan, error) {
	pl := kernelPlan{pkg: opts.Package, mods: opts.Modules, deb: opts.Deb}
	if pl.pkg.Package == "" {
		pl.pkg = DefaultKernel
	}
	if pl.mods == nil {
		pl.mods = DefaultModules
	}
	if pl.deb != "" {
		var err error
		if pl.debSum, err = fileSHA256(pl.deb); err != nil {
			return pl, fmt.Errorf("kernel: %w", err)
		}
		if pl.pkg.SHA256 != "" && !strings.EqualFold(pl.debSum, pl.pkg.SHA256) {
			return pl, fmt.Errorf("kernel: %s: SHA-256 %s, want %s (%s)", pl.deb, pl.debSum, pl.pkg.SHA256, pl.pkg)
		}
	} else {
		if pl.pkg.SHA256 == "" {
			return pl, fmt.Errorf("kernel: %s has no pinned SHA-256", pl.pkg)
		}
		pl.debSum = strings.ToLower(pl.pkg.SHA256)
	}
	pl.key = Key(append(append([]string{kernelFormat, pl.debSum, pl.pkg.Release}, pl.mods...), append([]string{"rw:"}, RWModules...)...)...)
	return pl, nil
}

// CachedKernel returns the kernel for opts if it is already in the cache;
// it never fetches or builds anything.
func (c *Cache) CachedKernel(opts KernelOptions) (*Kernel, bool, error) {
	pl, err := planKernel(opts)
	if err != nil {
		return nil, false, err
	}
	dir, ok := c.Lookup("kernel", pl.key)
	if !ok {
		return nil, false, nil
	}
	k, err := readKernelManifest(dir)
	return k, err == nil, err
}

// prepareKernel is PrepareKernel; force rebuilds a cached kernel (the .deb
// is still taken from the downloads cache when its checksum matches).
// cached says whether the cache already had it.
func (c *Cache) prepareKernel(ctx context.Context, opts KernelOptions, force bool) (*Kernel, bool, error) {
	pl, err := planKernel(opts)
	if err != nil {
		return nil, false, err
	}
	if dir, ok := c.Lookup("kernel", pl.key); ok && !force {
		k, err := readKernelManifest(dir)
		return k, true, err
	}
	deb := pl.deb
	if deb == "" {
		if deb, err = c.FetchKernelDeb(ctx, pl.pkg); err != nil {
			return nil, false, err
		}
	}
	build := func(dir string) error {
		k, err := buildKernel(ctx, deb, pl.pkg, pl.mods, dir)
		if err != nil {
			return fmt.Errorf("kernel %s: %w", pl.pkg, err)
		}
		k.DebSHA256 = pl.debSum
		b, err := json.MarshalIndent(k, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644)
	}
	var dir string
	if force {
		dir, err = c.Rebuild("kernel", pl.key, build)
	} else {
		dir, err = c.Ensure("kernel", pl.key, build)
	}
	if err != nil {
		return nil, false, err
	}
	k, err := readKernelManifest(dir)
	return k, false, err
}

func readKernelManifest(dir string) (*Kernel, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("kernel cache %s: %w", dir, err)
	}
	var k Kernel
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("kernel cache %s: %w", dir, err)
	}
	k.Dir = dir
	return &k, nil
}

// buildKernel unpacks deb into dir: vmlinux, config, modules/<name>.ko.
// Every module is staged (we learn the dependency graph only once the
// whole archive has been read), then the ones needed are kept.
func buildKernel(ctx context.Context, deb string, pkg KernelPackage, want []string, dir string) (*Kernel, error) {
	stage := filepath.Join(dir, ".stage")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)

	vmlinuz := "boot/vmlinuz-" + pkg.Release
	modPrefix := "lib/modules/" + pkg.Release + "/"
	var (
		bz      []byte
		config  []byte
		builtin = map[string]bool{}
		infos   = map[string]modInfo{}
		staged  = map[string]string{} // module name → staged file
	)
	err := walkDeb(deb, func(h *tar.Header, r io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		var err error
		switch {
		case h.Name == vmlinuz:
			bz, err = readAllLimited(r, maxVmlinux)
		case h.Name == "boot/config-"+pkg.Release:
			config, err = readAllLimited(r, 16<<20)
		case h.Name == modPrefix+"modules.builtin":
			builtin, err = parseBuiltin(r)
		case strings.HasPrefix(h.Name, modPrefix) && isModuleFile(h.Name):
			var raw, ko []byte
			if raw, err = readAllLimited(r, maxModule); err != nil {
				break
			}
			if ko, err = decompressModule(h.Name, raw); err != nil {
				break
			}
			var mi modInfo
			if mi, err = parseModinfo(ko); err != nil {
				break
			}
			if _, dup := infos[mi.name]; dup {
				return fmt.Errorf("module %s appears twice in the package", mi.name)
			}
			infos[mi.name] = mi
			p := filepath.Join(stage, fmt.Sprintf("%d.ko", len(staged)))
			staged[mi.name] = p
			err = os.WriteFile(p, ko, 0o644)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if bz == nil {
		return nil, fmt.Errorf("no %s in the package (is Release %q right?)", vmlinuz, pkg.Release)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("no modules under %s in the package", modPrefix)
	}
	kern := &Kernel{Package: pkg.String(), Release: pkg.Release}
	var boot []byte
	switch pkg.arch() {
	case arch.AMD64:
		v, err := ExtractVmlinux(bz)
		if err != nil {
			return nil, err
		}
		boot, kern.Compression, kern.PVHEntry = v.ELF, v.Compression, v.PVHEntry
	case arch.ARM64:
		// Debian's arm64 vmlinuz is the Image itself (EFI stub, not
		// compressed): both vz and -M virt boot it as it is.
		if !arch.IsARM64Image(bz) {
			return nil, fmt.Errorf("%s is not an uncompressed arm64 Image (no ARM\\x64 magic at 0x38): the package's format changed; vz boots only an uncompressed Image", vmlinuz)
		}
		boot, kern.Arch = bz, arch.ARM64
	default:
		return nil, fmt.Errorf("no kernel format known for %s", pkg.arch())
	}
	order, err := loadOrder(want, infos, builtin)
	if err != nil {
		return nil, err
	}
	all, err := loadOrder(append(slices.Clone(want), RWModules...), infos, builtin)
	if err != nil {
		return nil, err
	}
	var rw []string
	for _, n := range all {
		if !slices.Contains(order, n) {
			rw = append(rw, n)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, BootFileName(pkg.arch())), boot, 0o644); err != nil {
		return nil, err
	}
	if config != nil {
		if err := os.WriteFile(filepath.Join(dir, "config"), config, 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o755); err != nil {
		return nil, err
	}
	for _, n := range all {
		if err := os.Rename(staged[n], filepath.Join(dir, "modules", n+".ko")); err != nil {
			return nil, err
		}
	}
	kern.Modules, kern.RWModules = order, rw
	return kern, nil
}
