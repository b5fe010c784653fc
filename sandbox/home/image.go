package home

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capsem/capsem/guest/image"
)

// PinImage links the guest's files into the sandbox's image directory, so
// that the sandbox keeps using them whatever happens to the cache. Hard
// links cost no space; across filesystems the files are copied.
func (d Dir) PinImage(g *image.Guest) error {
	dir := d.ImageDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct{ src, name string }{{g.Kernel, image.BootFileName(g.Arch)}, {g.Initramfs, "initramfs"}, {g.Rootfs, "rootfs.erofs"}} {
		dst := filepath.Join(dir, f.name)
		_ = os.Remove(dst)
		if err := os.Link(f.src, dst); err != nil {
			if err := copyFile(f.src, dst); err != nil {
				return fmt.Errorf("keep the guest image for sandbox %s: %w", d.Name, err)
			}
		}
	}
	return nil
}

// Guest is the sandbox's pinned image.
func (d Dir) Guest(s Settings) *image.Guest {
	dir := d.ImageDir()
	a := s.GuestArch()
	return &image.Guest{ID: s.Image, Arch: a, Kernel: filepath.Join(dir, image.BootFileName(a)), Initramfs: filepath.Join(dir, "initramfs"), Rootfs: filepath.Join(dir, "rootfs.erofs")}
}

func copyFile(src, dst string) error {
	b, err := os.Open(src)
	if err != nil {
		return err
	}
	defer b.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(b); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}
