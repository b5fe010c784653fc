package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// mkfsFix is how to get mkfs.ext4 and resize2fs.
const mkfsFix = "apt-get install e2fsprogs (or go tool task deps)"

// CreateDataDisk makes path a sparse file of size bytes holding an empty
// ext4 filesystem whose root directory is root's, mode 0755 (the overlay's
// upper directory lives there; the guest's / is what it is in the image).
// The file appears only once complete.
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

// GrowDataDisk grows the filesystem of a data disk no guest is using to
// size bytes (e2fsck, then resize2fs). It never shrinks one.
func GrowDataDisk(ctx context.Context, path string, size int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("data disk: %w", err)
	}
	if size <= st.Size() {
		return nil
	}
	var tools [2]string
	for i, tool := range []string{"e2fsck", "resize2fs"} {
		p, err := lookPathSbin(tool)
		if err != nil {
			return fmt.Errorf("data disk: %s not found: %s", tool, mkfsFix)
		}
		tools[i] = p
	}
	// e2fsck exits 1 when it fixed something, which is fine before a resize.
	if out, err := exec.CommandContext(ctx, tools[0], "-f", "-p", path).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() > 1 {
			return fmt.Errorf("data disk: e2fsck %s: %v: %s", path, err, bytes.TrimSpace(out))
		}
	}
	if err := os.Truncate(path, size); err != nil {
		return fmt.Errorf("data disk: %w", err)
	}
	if out, err := exec.CommandContext(ctx, tools[1], path).CombinedOutput(); err != nil {
		return fmt.Errorf("data disk: resize2fs %s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
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
