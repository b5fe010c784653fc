package image

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/capsem/capsem/guest/arch"
)

// Guest is a bootable guest: the files hypervisor.Config needs.
type Guest struct {
	ID            string    // content address of the three parts (short hex)
	Arch          arch.Arch // what it is built for
	Kernel        string    // the file the hypervisor boots: amd64's vmlinux, arm64's Image
	Initramfs     string
	Rootfs        string // erofs image
	KernelRelease string
	Size          int64 // bytes on disk of the three
}

// BuildOptions tune BuildDefault.
type BuildOptions struct {
	Agent    string    // path of the static capsem-agent binary to be /init, built for Arch
	Arch     arch.Arch // the guest's architecture; "" is the host's
	Progress io.Writer // human progress lines, nil = quiet
	Force    bool      // rebuild even if cached
}

// defaultInitramfsCompression: uncompressed, since the guest boots under
// TCG where decompressing costs more than reading.
const defaultInitramfsCompression = None

// guestIDLen is the length of Guest.ID.
const guestIDLen = 12

// BuildDefault returns the default guest of opts.Arch, building whatever
// part of it is not cached: the pinned kernel (apt-get download, ~5 s), the
// root filesystem (mmdebstrap, npm, mkfs.erofs: a few minutes, as root),
// and an initramfs whose /init is opts.Agent.
func (c *Cache) BuildDefault(ctx context.Context, opts BuildOptions) (*Guest, error) {
	t, err := TargetFor(opts.Arch)
	if err != nil {
		return nil, err
	}
	if err := CheckStaticAgent(opts.Agent, t.Arch); err != nil {
		return nil, err
	}
	r := t.Rootfs
	if err := r.check(); err != nil {
		return nil, err
	}
	_, rootCached := c.cachedRootfs(r)
	steps := 3 // kernel, root filesystem, initramfs
	if !rootCached || opts.Force {
		// Fail before any download if the slow part cannot be built here.
		if err := RootfsPreflight(t.Arch); err != nil {
			return nil, err
		}
		steps = 4 // the root filesystem is two: Debian, then npm and the image
	}
	p := newProgress(opts.Progress, steps)

	p.step("kernel %s…", t.Kernel.Package)
	k, cached, err := c.prepareKernel(ctx, t.Kernel, opts.Force)
	if err != nil {
		return nil, err
	}
	p.note("%s", cachedOr(cached, "fetched and unpacked"))

	if rootCached && !opts.Force {
		p.step("root filesystem: cached (%s)", shortKey(r.Key()))
	}
	rootfs, _, err := c.rootfs(ctx, r, opts.Force, p)
	if err != nil {
		return nil, err
	}

	p.step("initramfs with capsem-agent…")
	initrd, cached, err := c.initramfs(k, opts.Agent, defaultInitramfsCompression, opts.Force)
	if err != nil {
		return nil, err
	}
	p.note("%s", cachedOr(cached, "built"))

	g, err := newGuest(k, initrd, rootfs)
	if err != nil {
		return nil, err
	}
	p.finish("guest %s ready: %s", g.ID, mib(g.Size))
	return g, nil
}

// FindDefault returns architecture a's default guest ("" is the host's)
// if every part is already cached, without network access or long work
// (it hashes the agent binary). ok=false if something must be built.
func (c *Cache) FindDefault(agent string, a arch.Arch) (*Guest, bool, error) {
	t, err := TargetFor(a)
	if err != nil {
		return nil, false, err
	}
	if err := CheckStaticAgent(agent, t.Arch); err != nil {
		return nil, false, err
	}
	k, ok, err := c.CachedKernel(t.Kernel)
	if err != nil || !ok {
		return nil, false, err
	}
	rootfs, ok := c.cachedRootfs(t.Rootfs)
	if !ok {
		return nil, false, nil
	}
	initrd, ok, err := c.cachedInitramfs(k, agent, defaultInitramfsCompression)
	if err != nil || !ok {
		return nil, false, err
	}
	g, err := newGuest(k, initrd, rootfs)
	if err != nil {
		return nil, false, err
	}
	return g, true, nil
}

func newGuest(k *Kernel, initrd, rootfs string) (*Guest, error) {
	g := &Guest{
		Arch:          k.arch(),
		Kernel:        k.Boot(),
		Initramfs:     initrd,
		Rootfs:        rootfs,
		KernelRelease: k.Release,
	}
	for _, p := range []string{g.Kernel, g.Initramfs, g.Rootfs} {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("guest: %w", err)
		}
		g.Size += st.Size()
	}
	// Each part's directory name is its content address.
	g.ID = Key(filepath.Base(k.Dir), filepath.Base(filepath.Dir(initrd)), filepath.Base(filepath.Dir(rootfs)))[:guestIDLen]
	return g, nil
}

// cachedRootfs is the image's path if the recipe's image is cached.
func (c *Cache) cachedRootfs(r RootfsRecipe) (string, bool) {
	dir, ok := c.Lookup("rootfs", r.Key())
	if !ok {
		return "", false
	}
	p := filepath.Join(dir, RootfsImageName)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	return p, true
}

// rootfs returns the image for r, building it (two progress steps) when it
// is not cached or force is set. cached says whether the cache had it.
func (c *Cache) rootfs(ctx context.Context, r RootfsRecipe, force bool, p *progress) (string, bool, error) {
	if err := r.check(); err != nil {
		return "", false, err
	}
	if img, ok := c.cachedRootfs(r); ok && !force {
		return img, true, nil
	}
	build := func(dir string) error {
		m, err := buildRootfs(ctx, r, dir, p)
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644)
	}
	var dir string
	var err error
	if force {
		dir, err = c.Rebuild("rootfs", r.Key(), build)
	} else {
		dir, err = c.Ensure("rootfs", r.Key(), build)
	}
	if err != nil {
		return "", false, err
	}
	return filepath.Join(dir, RootfsImageName), false, nil
}

// CheckStaticAgent checks that path is an ELF executable for architecture
// a ("" is the host's) without an interpreter: it runs as /init, before any
// root filesystem (and its dynamic loader) exists.
func CheckStaticAgent(path string, a arch.Arch) error {
	if a == "" {
		a = arch.Host()
	}
	build := fmt.Sprintf("build it with CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o %s ./guest/cmd/capsem-agent (go tool task build does)", a, AgentFile(a))
	if path == "" {
		return fmt.Errorf("no capsem-agent binary given: %s", build)
	}
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("capsem-agent at %s does not exist: %s", path, build)
		}
		return fmt.Errorf("capsem-agent at %s is not an ELF executable (%v): %s", path, err, build)
	}
	defer f.Close()
	if f.Machine != a.Machine() {
		return fmt.Errorf("capsem-agent at %s is built for %s, the guest is %s (%s): %s", path, f.Machine, a, a.Machine(), build)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("capsem-agent at %s is an ELF %s, not an executable: %s", path, f.Type, build)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("capsem-agent at %s is dynamically linked; %s", path, build)
		}
	}
	return nil
}

// AgentFile is the file name of the agent built for a, as the build task
// puts it next to capsem: capsem-agent for the host's architecture,
// capsem-agent-ARCH for another.
func AgentFile(a arch.Arch) string {
	if a == "" || a == arch.Host() {
		return "capsem-agent"
	}
	return "capsem-agent-" + a.String()
}

func cachedOr(cached bool, what string) string {
	if cached {
		return "cached"
	}
	return what
}

func shortKey(k string) string {
	if len(k) > guestIDLen {
		return k[:guestIDLen]
	}
	return k
}

// mib formats a byte count for people.
func mib(n int64) string {
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
