package vz

import (
	"io/fs"
	"os"
	"path/filepath"
)

// The workspace under vz. The framework's virtio-fs server runs inside this
// process and creates and changes files with its identity, so the guest's
// chown cannot give a host file another owner, and mknod of a device needs
// a root this process does not have: New refuses to run as root. What the
// owner may do to their own files the guest may too, and that includes the
// setuid and setgid bits: a guest-planted setuid file would run as the
// workspace owner for anyone who starts it. stripSetID takes those bits off
// every file of the workspace when the VM stops (finish), and the guest
// agent mounts the share nosuid so that they mean nothing inside either.
// Between the guest setting a bit and the VM stopping, a host user other
// than the owner who runs a file in the workspace runs it as the owner: the
// qemu backend, whose 9p server keeps guest modes in extended attributes,
// has no such window.

// stripSetID clears the setuid and setgid bits of every regular file under
// dir and returns the paths it changed. It does not follow symbolic links.
func stripSetID(dir string) ([]string, error) {
	var changed []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file that vanished or cannot be read: go on
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		m := info.Mode()
		if m&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
			return nil
		}
		if err := os.Chmod(path, m.Perm()); err != nil {
			return err
		}
		changed = append(changed, path)
		return nil
	})
	return changed, err
}
