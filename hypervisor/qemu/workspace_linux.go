//go:build linux

package qemu

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// workspaceRunAs is the -runas value for a workspace: when capsem runs as
// root and the workspace belongs to another user, QEMU drops to that user
// (and its group) once it has opened the kernel, the images and its
// sockets, so every file the guest creates is the workspace owner's, as if
// the user had made it, and a QEMU escape is that user's, not root's. A
// root-owned workspace keeps QEMU as root: nobody else could write it.
func workspaceRunAs(workspace string) (string, error) {
	if workspace == "" || os.Geteuid() != 0 {
		return "", nil
	}
	st, err := os.Stat(workspace)
	if err != nil {
		return "", fmt.Errorf("qemu: workspace: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Uid == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d:%d", sys.Uid, sys.Gid), nil
}

// checkWorkspaceXattrs makes sure the workspace's filesystem keeps user
// extended attributes, where 9p's mapped-xattr model stores the guest's
// owners and modes; without them every guest write would fail.
func checkWorkspaceXattrs(workspace string) error {
	const probe = "user.capsem.probe"
	err := unix.Setxattr(workspace, probe, []byte("1"), 0)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("qemu: the workspace %s is on a filesystem without user extended attributes, where capsem keeps the guest's file owners and modes (9p security_model=mapped-xattr) so that none reach the host: use a workspace on ext4, xfs, btrfs or tmpfs", workspace)
	}
	if err == nil {
		_ = unix.Removexattr(workspace, probe)
	}
	return nil // another error (not the owner, read-only) is QEMU's to report
}
