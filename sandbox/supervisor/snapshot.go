package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// The snapshots of a running sandbox: the api.Backend's part that saves
// its guest (sandbox.Save) into the files sandbox/home lays out.

// saveTimeout bounds one save: the agent's freeze, the pause and the copy
// of the touched RAM and of the disk (seconds for GiBs).
const saveTimeout = 5 * time.Minute

// TakeSnapshot saves the guest as snapshot tag ("": the time) and lets
// it go on.
func (s *supervisor) TakeSnapshot(ctx context.Context, tag string) (api.Snapshot, error) {
	// Two saves in one second share the default tag, and one's partial
	// directory: the second must see the first's snapshot.
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if tag == "" {
		tag = home.DefaultTag(time.Now())
	}
	if err := home.CheckTag(tag); err != nil {
		return api.Snapshot{}, err
	}
	dir := s.dir.SnapshotDir(tag)
	if _, err := os.Stat(dir); err == nil {
		return api.Snapshot{}, fmt.Errorf("%w: sandbox %s has a snapshot %q already (capsem snapshot rm %s %s removes it)", api.ErrSnapshotExists, s.dir.Name, tag, s.dir.Name, tag)
	}
	// Compressed: snapshots are kept, and forked; a fork's start expands
	// the RAM while QEMU starts.
	m, err := s.save(ctx, dir, sandbox.SaveOptions{Disk: true, Compress: true, Reason: "capsem snapshot " + s.dir.Name + "@" + tag})
	if err != nil {
		return m, err
	}
	m.Tag = tag
	s.log.Info("snapshot taken", "tag", tag, "bytes", m.Bytes, "paused_ms", m.PausedMS)
	return m, nil
}

// Suspend saves the guest to the sandbox's suspended state and stops the
// sandbox: the next start resumes it.
func (s *supervisor) Suspend(ctx context.Context) (api.Snapshot, error) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	_ = os.RemoveAll(s.dir.SuspendDir())
	// Not compressed: the next start waits for the RAM, and a sparse copy
	// of a booted guest's is 40-60 ms, its expansion 80-90 ms (TCG's QEMU
	// starts meanwhile on the same CPUs: a resume took ~30 ms longer).
	m, err := s.save(ctx, s.dir.SuspendDir(), sandbox.SaveOptions{Stop: true, Reason: "capsem suspend " + s.dir.Name})
	if err != nil {
		return m, err
	}
	s.suspended.Store(true)
	s.Stop()
	s.log.Info("sandbox suspended", "bytes", m.Bytes, "paused_ms", m.PausedMS)
	return m, nil
}

// save writes the guest into dir (through its partial directory) with its
// record.
func (s *supervisor) save(ctx context.Context, dir string, o sandbox.SaveOptions) (api.Snapshot, error) {
	select {
	case <-s.stopping:
		return api.Snapshot{}, api.ErrStopping
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	partial := home.PartialDir(dir)
	_ = os.RemoveAll(partial)
	o.Dir = partial
	created := time.Now().UTC()
	sv, err := s.sb.Save(ctx, o)
	if err != nil {
		_ = os.RemoveAll(partial)
		return api.Snapshot{}, err
	}
	m := api.Snapshot{
		Sandbox: s.dir.Name, SessionID: s.rs.ID(), Created: created,
		PausedMS: float64(sv.Paused.Microseconds()) / 1000, Disk: o.Disk,
		Image: s.settings.Image, Capsem: s.host, Machine: sv.Machine,
		CPUs: s.settings.CPUs, MemoryMiB: s.settings.MemoryMiB,
		Placeholders: s.sb.Policy().Placeholders(),
		Agent:        sv.Agent, Ready: sv.Ready,
	}
	m.Bytes = home.DirBytes(partial)
	if err := home.CommitSnapshot(partial, dir, m); err != nil {
		_ = os.RemoveAll(partial)
		return m, err
	}
	return m, nil
}

// Snapshots lists the sandbox's snapshots.
func (s *supervisor) Snapshots() ([]api.Snapshot, error) { return s.dir.Snapshots() }

// RemoveSnapshot removes snapshot tag.
func (s *supervisor) RemoveSnapshot(tag string) error { return RemoveSnapshot(s.dir, tag) }

// RemoveSnapshot removes sandbox d's snapshot tag, running or not.
func RemoveSnapshot(d home.Dir, tag string) error {
	if err := home.CheckTag(tag); err != nil {
		return err
	}
	dir := d.SnapshotDir(tag)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox %s has no snapshot %q (capsem snapshots %s lists them): %w", d.Name, tag, d.Name, fs.ErrNotExist)
	}
	return os.RemoveAll(dir)
}
