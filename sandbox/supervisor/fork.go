package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// Fork makes sandbox dst from snapshot tag of sandbox src ("": its
// newest), with the settings s (src's, with the fork's flags applied):
// src's image pinned again, its own copy of the snapshot's disk (a
// reflink where the filesystem has them, else sparse), and the snapshot's
// guest as dst's suspended state, which dst's first start resumes, and
// src's overlay of "always" answers. The
// saved files are hard-linked, not copied: a restore only reads them. A
// fork that fails on the way is removed.
func Fork(ctx context.Context, src home.Dir, tag string, dst home.Dir, s home.Settings) (err error) {
	dir, m, err := src.FindSnapshot(tag)
	if err != nil {
		return err
	}
	srcSettings, err := src.ReadSettings()
	if err != nil {
		return err
	}
	if m.CPUs != s.CPUs || m.MemoryMiB != s.MemoryMiB {
		return fmt.Errorf("snapshot %s@%s has %d CPUs and %d MiB; a fork keeps them (drop --cpus and --memory)", src.Name, m.Tag, m.CPUs, m.MemoryMiB)
	}
	if err := os.MkdirAll(dst.Dir, 0o700); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dst.Dir)
		}
	}()
	if err := dst.PinImage(src.Guest(srcSettings)); err != nil {
		return err
	}
	s.Image = srcSettings.Image
	if _, err := hypervisor.CopySparse(dst.Disk(), filepath.Join(dir, sandbox.DiskFile), 0o600); err != nil {
		return fmt.Errorf("the fork's disk: %w", err)
	}
	if err := EnsureDisk(ctx, dst, s.DiskGiB); err != nil {
		return err
	}
	// What a person answered "always" in src is part of its policy: the
	// fork, which runs under src's policy file, keeps it too.
	if kept, err := src.Overlay().Grants(); err != nil {
		return err
	} else if !kept.Empty() {
		if err := dst.Overlay().Keep(kept); err != nil {
			return err
		}
	}
	m.Origin = fmt.Sprintf("snapshot %s@%s of session %s", src.Name, m.Tag, m.SessionID)
	m.Disk = false
	if err := stageSuspended(dst, dir, m); err != nil {
		return err
	}
	return dst.WriteSettings(s)
}

// stageSuspended makes the saved guest in dir (its state and RAM) d's
// suspended state, with the record m, which d's next start resumes. The
// files are linked, not copied: a restore only reads them.
func stageSuspended(d home.Dir, dir string, m api.Snapshot) error {
	partial := home.PartialDir(d.SuspendDir())
	_ = os.RemoveAll(partial)
	if err := os.MkdirAll(partial, 0o700); err != nil {
		return err
	}
	for _, f := range sandbox.SavedFiles(dir) {
		if err := linkOrCopy(filepath.Join(dir, f), filepath.Join(partial, f)); err != nil {
			_ = os.RemoveAll(partial)
			return err
		}
	}
	return home.CommitSnapshot(partial, d.SuspendDir(), m)
}

// linkOrCopy hard-links src as dst, or copies it (sparse) across
// filesystems.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	_, err := hypervisor.CopySparse(dst, src, 0o600)
	return err
}
