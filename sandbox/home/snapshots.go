package home

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/capsem/capsem/sandbox/api"
)

// A sandbox's saved guests:
//
//	<data>/sandboxes/NAME/
//	  snapshots/TAG/   one snapshot (capsem snapshot NAME --tag TAG)
//	    state          the VM's device state  } sandbox.StateFile, RAMFile, DiskFile:
//	    ram            its RAM, sparse        } what sandbox.Save writes
//	    disk.ext4      the data disk then     }
//	    meta.json      its record (api.Snapshot), written last
//	  suspended/       the guest a start resumes: a suspend's, or the snapshot a fork
//	                   starts from; state, ram, meta.json (the disk is the sandbox's)
//
// A snapshot is written into TAG.partial and renamed once meta.json is in
// it: a directory without meta.json is not a snapshot (an interrupted
// save), and is ignored and removed. Every file is 0600. Stability:
// restores by later capsems read these names and meta.json.

// metaFile is a snapshot's record.
const metaFile = "meta.json"

// partialSuffix marks a snapshot being written.
const partialSuffix = ".partial"

func (d Dir) snapshotsRoot() string { return filepath.Join(d.Dir, "snapshots") }

// SnapshotDir is snapshot tag's directory.
func (d Dir) SnapshotDir(tag string) string { return filepath.Join(d.snapshotsRoot(), tag) }

// SuspendDir is the saved guest the next start resumes.
func (d Dir) SuspendDir() string { return filepath.Join(d.Dir, "suspended") }

// CheckTag says why tag is not a snapshot tag, or nil: it becomes a
// directory name, and NAME@TAG must read one way.
func CheckTag(tag string) error {
	if !NameRule.MatchString(tag) {
		return fmt.Errorf("%w %q: want 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit", api.ErrBadTag, tag)
	}
	return nil
}

// DefaultTag is the tag of a snapshot taken at t without one.
func DefaultTag(t time.Time) string { return t.UTC().Format("20060102-150405") }

// PartialDir is where the snapshot that becomes dir is written.
func PartialDir(dir string) string { return dir + partialSuffix }

// CommitSnapshot writes m into partial and renames it to dir: from then
// on it is a snapshot.
func CommitSnapshot(partial, dir string, m api.Snapshot) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(partial, metaFile), append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(partial, dir)
}

// ReadSnapshot reads the record of the snapshot in dir.
func ReadSnapshot(dir string) (api.Snapshot, error) {
	var m api.Snapshot
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("snapshot %s: %s: %w", dir, metaFile, err)
	}
	return m, nil
}

// Snapshots are the sandbox's snapshots, oldest first. Interrupted saves
// are removed on the way.
func (d Dir) Snapshots() ([]api.Snapshot, error) {
	entries, err := os.ReadDir(d.snapshotsRoot())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []api.Snapshot
	for _, e := range entries {
		p := filepath.Join(d.snapshotsRoot(), e.Name())
		if !e.IsDir() || CheckTag(e.Name()) != nil {
			if strings.HasSuffix(e.Name(), partialSuffix) && !d.Locked() {
				_ = os.RemoveAll(p) // a save that did not finish
			}
			continue
		}
		m, err := ReadSnapshot(p)
		if err != nil {
			continue
		}
		m.Tag = e.Name()
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b api.Snapshot) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// FindSnapshot is snapshot tag's directory and record; tag "" is the
// newest snapshot.
func (d Dir) FindSnapshot(tag string) (string, api.Snapshot, error) {
	if tag != "" {
		if err := CheckTag(tag); err != nil {
			return "", api.Snapshot{}, err
		}
		dir := d.SnapshotDir(tag)
		if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
			// As the listing does: a snapshot is a directory, not a link.
			return "", api.Snapshot{}, fmt.Errorf("sandbox %s: %s is not a snapshot directory", d.Name, dir)
		}
		m, err := ReadSnapshot(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return "", m, fmt.Errorf("sandbox %s has no snapshot %q (capsem snapshots %s lists them)", d.Name, tag, d.Name)
		}
		return dir, m, err
	}
	all, err := d.Snapshots()
	if err != nil {
		return "", api.Snapshot{}, err
	}
	if len(all) == 0 {
		return "", api.Snapshot{}, fmt.Errorf("sandbox %s has no snapshots (capsem snapshot %s takes one)", d.Name, d.Name)
	}
	m := all[len(all)-1]
	return d.SnapshotDir(m.Tag), m, nil
}

// Suspended is the saved guest the next start resumes. An error that is
// fs.ErrNotExist means there is none (or a suspend that did not finish);
// any other, a saved guest whose record cannot be read.
func (d Dir) Suspended() (api.Snapshot, error) {
	return ReadSnapshot(d.SuspendDir())
}

// SnapshotBytes is what the sandbox's snapshots and suspended guest take
// on the host.
func (d Dir) SnapshotBytes() int64 {
	return DirBytes(d.snapshotsRoot()) + DirBytes(d.SuspendDir())
}

// DirBytes is what the files under dir take on disk: allocated blocks,
// so a sparse file counts what it holds; a file linked twice under dir
// counts once.
func DirBytes(dir string) int64 {
	var n int64
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if seen[uint64(st.Ino)] {
				return nil
			}
			seen[uint64(st.Ino)] = true
			n += int64(st.Blocks) * 512
			return nil
		}
		n += info.Size()
		return nil
	})
	return n
}
