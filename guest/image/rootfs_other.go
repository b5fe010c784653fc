//go:build !linux

package image

import (
	"context"
	"errors"

	"github.com/capsem/capsem/guest/arch"
)

var errRootfsLinux = errors.New("building the root filesystem needs Linux (mmdebstrap, chroot): build the guest on a Linux host, or copy a built cache ($XDG_CACHE_HOME/capsem) here")

// RootfsPreflight says what is missing to build a root filesystem on this
// host: here, Linux itself.
func RootfsPreflight(arch.Arch) error { return errRootfsLinux }

type rootfsManifest struct{}

func buildRootfs(context.Context, RootfsRecipe, string, *progress) (*rootfsManifest, error) {
	return nil, errRootfsLinux
}

// RunRootfsJob returns at once: builds in a user namespace are Linux's.
func RunRootfsJob() {}
