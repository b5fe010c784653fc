package supervisor

import (
	"context"
	"errors"
	"os"

	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/sandbox/home"
)

// Prepare makes sandbox d ready to start with the settings s: the first
// time (fresh) its directory and its pinned copy of the guest that guest
// gives, then its disk at s.DiskGiB (EnsureDisk), and the settings last —
// a sandbox whose settings exist is complete. A fresh sandbox that fails
// on the way is removed.
func Prepare(ctx context.Context, d home.Dir, s home.Settings, fresh bool, guest func() (*image.Guest, error)) error {
	if fresh {
		if err := os.MkdirAll(d.Dir, 0o700); err != nil {
			return err
		}
		g, err := guest()
		if err != nil {
			os.RemoveAll(d.Dir)
			return err
		}
		if err := d.PinImage(g); err != nil {
			os.RemoveAll(d.Dir)
			return err
		}
		s.Image = g.ID
	}
	if err := EnsureDisk(ctx, d, s.DiskGiB); err != nil {
		if fresh {
			os.RemoveAll(d.Dir)
		}
		return err
	}
	return d.WriteSettings(s)
}

// EnsureDisk makes the sandbox's disk when it has none, and lengthens it
// to gib GiB when it is smaller: the guest grows the filesystem in it at
// boot, no host tool touches it (image.GrowDataDisk).
func EnsureDisk(ctx context.Context, d home.Dir, gib int) error {
	size := int64(gib) << 30
	st, err := os.Stat(d.Disk())
	if errors.Is(err, os.ErrNotExist) {
		return image.CreateDataDisk(ctx, d.Disk(), size)
	}
	if err != nil {
		return err
	}
	if st.Size() < size {
		return image.GrowDataDisk(d.Disk(), size)
	}
	return nil
}
