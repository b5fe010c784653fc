package hypervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// reflink makes out share in's blocks (FICLONE): xfs, btrfs, bcachefs.
func reflink(out, in *os.File) error {
	return unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
}
