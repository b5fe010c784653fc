package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// A long-lived sandbox's writable disk: a sparse file of exactly its cap,
// formatted ext4 on the host, attached to the guest as the root's writable
// layer (hypervisor.Config.DataDisk). Why ext4 on a raw sparse file and not
// qcow2: both backends take a raw image (Apple's Virtualization framework
// takes nothing else), the guest's ENOSPC at the cap is the filesystem's
// own, the host file never grows past the cap, and the guest's discards
// punch holes back into it, so what it takes on the host is what the
// guest holds.

// mkfsFix is how to get mkfs.ext4.
const mkfsFix = "apt-get install e2fsprogs (or go tool task deps)"

// CreateDataDisk makes path a sparse file of size bytes holding an empty
// ext4 filesystem whose root directory is root's, mode 0755 (the overlay's
// upper directory lives there; the guest's / is what it is in the image).
// The file appears only once complete. mkfs.ext4 runs on the host because
// it writes a new file capsem made, which no guest has written to; once a
// guest has used the disk, no host tool reads it again (GrowDataDisk).
func CreateDataDisk(ctx context.Context, path string, size int64) error {
	if size < 64<<20 {
		return fmt.Errorf("data disk: %d bytes is too small for ext4 with a journal (64 MiB at least)", size)
	}
	mkfs, err := lookPathSbin("mkfs.ext4")
	if err != nil {
		return fmt.Errorf("data disk: mkfs.ext4 not found: %s", mkfsFix)
	}
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("data disk: %w", err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("data disk: %w", err)
	}
	// -m 0: the guest's only user is root, reserved blocks help no one.
	// lazy_itable_init: the inode tables are not written (the sparse file
	// reads as zeros; the guest mounts with noinit_itable), so the new
	// file takes a few MiB on the host, not a hundred; nodiscard: nothing
	// to discard in a new sparse file.
	cmd := exec.CommandContext(ctx, mkfs, "-F", "-q", "-m", "0", "-L", "capsem-rw",
		"-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("data disk: mkfs.ext4 %s: %v: %s", tmp, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("data disk: %w", err)
	}
	return nil
}

// GrowDataDisk lengthens the data disk at path to size bytes, and does
// nothing else: it never shrinks one, and it runs no tool on it. Every
// byte of the filesystem in it is what guest root wrote, so a host tool
// that parsed it (e2fsck, resize2fs: a parser bug, run as the invoking
// user, root in root mode) would be a way out of the guest; the guest's
// PID 1 grows the mounted filesystem to fill the longer device at its next
// boot (guest/boot.GrowDisk). A path that is not a regular file (a
// symlink, a device, a FIFO) is refused.
func GrowDataDisk(path string, size int64) error {
	notDisk := func(what string) error {
		return fmt.Errorf("data disk: %s is %s, not the disk capsem made (capsem rm, then start, makes a new one)", path, what)
	}
	if st, err := os.Lstat(path); err != nil {
		return fmt.Errorf("data disk: %w", err)
	} else if st.Mode()&os.ModeSymlink != 0 {
		return notDisk("a symlink")
	} else if !st.Mode().IsRegular() {
		return notDisk("not a regular file (" + st.Mode().Type().String() + ")")
	}
	// O_NOFOLLOW and the fstat on the descriptor: what is lengthened is a
	// regular file at path, never what a symlink swapped in since leads to;
	// O_NONBLOCK so that a FIFO swapped in is refused, not waited on.
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("data disk: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("data disk: %w", err)
	}
	if !st.Mode().IsRegular() {
		return notDisk("not a regular file (" + st.Mode().Type().String() + ")")
	}
	if size <= st.Size() {
		return nil
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("data disk: lengthen %s to %d bytes: %w", path, size, err)
	}
	return f.Close()
}

// DiskUsage is what a (sparse) disk file takes on the host, and its size.
func DiskUsage(path string) (used, size int64, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return st.Size(), st.Size(), nil
	}
	return int64(sys.Blocks) * 512, st.Size(), nil
}
