package image

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// Where the guest finds its modules in the initramfs: the files are
// ModulesDir/<name>.ko, and ModuleOrderFile lists their file names, one a
// line, in the order to finit_module them (dependencies first; virtio_mmio
// before any virtio device driver).
const (
	ModulesDir      = "/lib/modules"
	ModuleOrderFile = "/lib/modules/capsem.order"
)

// initramfsFormat changes whenever the initramfs layout changes.
const initramfsFormat = "capsem-initramfs-1"

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
	var order strings.Builder
	for _, m := range k.Modules {
		if err := r.AddFileFrom(filepath.Join(ModulesDir, m+".ko"), 0o644, k.ModulePath(m)); err != nil {
			return nil, err
		}
		order.WriteString(m + ".ko\n")
	}
	if err := r.AddFile(ModuleOrderFile, 0o644, []byte(order.String())); err != nil {
		return nil, err
	}
	return r, nil
}

// Initramfs returns the cached initramfs for kernel k and the /init at
// initPath, building it if needed. Its key covers the kernel's inputs, the
// init binary's SHA-256, the compression and the layout version.
func (c *Cache) Initramfs(k *Kernel, initPath string, comp Compression) (string, error) {
	if comp == "" {
		comp = None
	}
	if comp != None && comp != Gzip {
		return "", fmt.Errorf("initramfs: compression %q: want none or gzip", comp)
	}
	sum, err := fileSHA256(initPath)
	if err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	parts := []string{initramfsFormat, k.DebSHA256, k.Release, sum, string(comp)}
	parts = append(parts, k.Modules...)
	name := "initramfs.cpio"
	if comp == Gzip {
		name += ".gz"
	}
	dir, err := c.Ensure("initramfs", Key(parts...), func(dir string) error {
		r, err := NewBootInitramfs(k, initPath)
		if err != nil {
			return err
		}
		return r.WriteFile(filepath.Join(dir, name), comp)
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}
