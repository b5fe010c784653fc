package image

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capsem/capsem/guest/bootparam"
)

// Where the guest finds its modules in the initramfs: the files are
// ModulesDir/<name>.ko, and bootparam.ModuleOrder lists their file names,
// one a line, in the order to finit_module them (dependencies first;
// virtio_mmio before any virtio device driver); bootparam.RWModuleOrder
// those a writable disk needs besides.
const ModulesDir = "/lib/modules"

// initramfsFormat changes whenever the initramfs layout changes.
const initramfsFormat = "capsem-initramfs-2"

// NewBootInitramfs is the guest's initramfs: /init (the static binary at
// initPath), /dev/console so /init has stdio before it mounts devtmpfs,
// the empty mount points /dev /proc /sys /run /tmp /mnt, and the kernel's
// modules with their load order.
func NewBootInitramfs(k *Kernel, initPath string) (*Initramfs, error) {
	r := NewInitramfs()
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "mnt"} {
		perm := fs.FileMode(0o755)
		if d == "tmp" {
			perm = 0o777 | fs.ModeSticky
		}
		if err := r.AddDir(d, perm); err != nil {
			return nil, err
		}
	}
	if err := r.AddCharDev("dev/console", 0o600, 5, 1); err != nil {
		return nil, err
	}
	if err := r.AddFileFrom("init", 0o755, initPath); err != nil {
		return nil, err
	}
	for _, list := range []struct {
		file string
		mods []string
	}{{bootparam.ModuleOrder, k.Modules}, {bootparam.RWModuleOrder, k.RWModules}} {
		var order strings.Builder
		for _, m := range list.mods {
			if err := r.AddFileFrom(filepath.Join(ModulesDir, m+".ko"), 0o644, k.ModulePath(m)); err != nil {
				return nil, err
			}
			order.WriteString(m + ".ko\n")
		}
		if err := r.AddFile(list.file, 0o644, []byte(order.String())); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Initramfs returns the cached initramfs for kernel k and the /init at
// initPath, building it if needed. Its key covers the kernel's inputs, the
// init binary's SHA-256, the compression and the layout version.
func (c *Cache) Initramfs(k *Kernel, initPath string, comp Compression) (string, error) {
	p, _, err := c.initramfs(k, initPath, comp, false)
	return p, err
}

// initramfsKey is the cache key and file name of an initramfs.
func initramfsKey(k *Kernel, initPath string, comp Compression) (key, name string, err error) {
	if comp == "" {
		comp = None
	}
	if comp != None && comp != Gzip {
		return "", "", fmt.Errorf("initramfs: compression %q: want none or gzip", comp)
	}
	sum, err := fileSHA256(initPath)
	if err != nil {
		return "", "", fmt.Errorf("initramfs: %w", err)
	}
	parts := []string{initramfsFormat, k.DebSHA256, k.Release, sum, string(comp)}
	parts = append(parts, k.Modules...)
	name = "initramfs.cpio"
	if comp == Gzip {
		name += ".gz"
	}
	return Key(parts...), name, nil
}

// cachedInitramfs is the initramfs's path if it is already cached.
func (c *Cache) cachedInitramfs(k *Kernel, initPath string, comp Compression) (string, bool, error) {
	key, name, err := initramfsKey(k, initPath, comp)
	if err != nil {
		return "", false, err
	}
	dir, ok := c.Lookup("initramfs", key)
	if !ok {
		return "", false, nil
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", false, nil
	}
	return p, true, nil
}

// initramfs is Initramfs; force rebuilds a cached one. cached says whether
// the cache already had it.
func (c *Cache) initramfs(k *Kernel, initPath string, comp Compression, force bool) (string, bool, error) {
	if !force {
		if p, ok, err := c.cachedInitramfs(k, initPath, comp); err != nil || ok {
			return p, ok, err
		}
	}
	key, name, err := initramfsKey(k, initPath, comp)
	if err != nil {
		return "", false, err
	}
	if comp == "" {
		comp = None
	}
	build := func(dir string) error {
		r, err := NewBootInitramfs(k, initPath)
		if err != nil {
			return err
		}
		if err := r.WriteFile(filepath.Join(dir, name), comp); err != nil {
			return err
		}
		// What `capsem image ls` says of it: the architecture of its
		// kernel's modules and its /init.
		return writeArchManifest(dir, k.arch())
	}
	var dir string
	if force {
		dir, err = c.Rebuild("initramfs", key, build)
	} else {
		dir, err = c.Ensure("initramfs", key, build)
	}
	if err != nil {
		return "", false, err
	}
	return filepath.Join(dir, name), false, nil
}
