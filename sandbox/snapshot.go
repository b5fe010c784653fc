package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/store"
)

// The files of a saved guest in its directory (SaveOptions.Dir). What
// else a snapshot holds (its record, meta.json) is sandbox/home's.
const (
	// StateFile is the VM's device state (the migration stream, no RAM).
	StateFile = "state"
	// RAMFile is the guest's RAM, sparse: the pages it touched.
	RAMFile = "ram"
	// RAMImageFile is the guest's RAM compressed (SaveOptions.Compress;
	// hypervisor.SaveRAMImage), there instead of RAMFile.
	RAMImageFile = "ram.lz4"
	// DiskFile is the data disk as it was at the save (SaveOptions.Disk).
	DiskFile = "disk.ext4"
)

// SavedFiles are the files of the guest saved in dir that a restore
// reads: its state and its RAM, compressed or not (the disk apart).
func SavedFiles(dir string) []string {
	ram, _ := savedRAM(dir)
	return []string{StateFile, filepath.Base(ram)}
}

// savedRAM is the RAM file of the guest saved in dir, and whether it is
// compressed.
func savedRAM(dir string) (path string, compressed bool) {
	p := filepath.Join(dir, RAMImageFile)
	if _, err := os.Lstat(p); err == nil {
		return p, true
	}
	return filepath.Join(dir, RAMFile), false
}

// vmSaver is what a save needs of the VM: both backends have it (vz's
// state file holds the RAM too, and its SaveRAM writes an empty file).
type vmSaver interface {
	Machine() string
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	SaveState(ctx context.Context, f *os.File) error
	SaveRAM(dst string, compress bool) (int64, error)
}

// SaveOptions say where a save goes and what follows it.
type SaveOptions struct {
	// Dir receives StateFile, RAMFile and DiskFile (created 0700 when
	// missing; the files are 0600).
	Dir string
	// Disk copies the data disk into Dir (a reflink where the filesystem
	// can, else sparse). False: the snapshot restores onto the sandbox's
	// own disk, which must not change before (a suspend: the guest does
	// not go on).
	Disk bool
	// Stop leaves the guest frozen and paused: the caller ends the VM
	// with Discard. False: it goes on once the files are written.
	Stop bool
	// Reason is told to the agent ("capsem snapshot NAME").
	Reason string
	// Compress writes the RAM as RAMImageFile: a third to a quarter of
	// the room a booted guest's RAM takes, for a longer pause (the
	// compression runs in it) and a restore that expands it; such a
	// snapshot cannot be restored copy-on-write (Restore.Private).
	// False: RAMFile, sparse.
	Compress bool
}

// Saved describes a save: what a restore needs to speak to the guest
// again and to refuse another machine, and what it cost.
type Saved struct {
	Machine string
	Agent   proto.Hello
	Ready   proto.Ready
	// Paused is how long the guest's vCPUs were stopped; Frozen how long
	// the agent held everything (the pause, the freeze and the thaw).
	Paused, Frozen time.Duration
}

// ErrNoSnapshots is returned by Save for a VM that cannot be saved.
var ErrNoSnapshots = errors.New("sandbox: this sandbox's VM cannot be snapshotted")

// Save snapshots the running guest: the agent flushes and unmounts the
// workspace and holds its output (proto Freeze), the VM is paused, its
// device state, RAM and (Disk) data disk are written at that one instant,
// then the guest goes on (or, Stop, stays paused for Discard). Commands
// running keep running in the guest, their output held meanwhile. A
// workspace some guest process holds open cannot be unmounted: the error
// names the processes and nothing was saved.
func (sb *Sandbox) Save(ctx context.Context, o SaveOptions) (sv Saved, err error) {
	vm, ok := sb.vm.(vmSaver)
	if !ok || vm.Machine() == "" {
		return sv, fmt.Errorf("%w: it was started without its RAM in a file (this backend, or a copy-on-write restore)", ErrNoSnapshots)
	}
	sb.saveMu.Lock()
	defer sb.saveMu.Unlock()
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return sv, err
	}
	if sb.xfer != nil {
		// The transfer disk is not in the snapshot: no transfer may be
		// half-way through it.
		if err := sb.xfer.take(ctx); err != nil {
			return sv, err
		}
		defer sb.xfer.give()
	}
	t0 := time.Now()
	thawed := false
	thaw := func() error {
		thawed = true
		// Whatever became of ctx: a guest left frozen takes no command.
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), thawTimeout)
		defer cancel()
		th, err := sb.client.Thaw(tctx, thawNow(false))
		for _, w := range th.Warnings {
			sb.log.Warn("guest: " + w)
		}
		return err
	}
	if _, err := sb.client.Freeze(ctx, o.Reason); err != nil {
		if errors.Is(err, proto.ErrBusy) || errors.Is(err, proto.ErrNoFreeze) {
			return sv, err // refused or never asked: the agent runs on, nothing held
		}
		// No answer: the agent may be frozen, and the client holds what
		// it would send until a Thaw.
		return sv, errors.Join(err, thaw())
	}
	defer func() {
		if !thawed && (err != nil || !o.Stop) {
			err = errors.Join(err, thaw())
		}
	}()
	if err := vm.Pause(ctx); err != nil {
		return sv, err
	}
	tp := time.Now()
	resumed := false
	defer func() {
		if !resumed && (err != nil || !o.Stop) {
			err = errors.Join(err, vm.Resume(context.WithoutCancel(ctx)))
		}
	}()
	if err := saveFiles(ctx, vm, o, sb.cfg.DataDisk); err != nil {
		return sv, err
	}
	sv = Saved{Machine: vm.Machine(), Agent: sb.client.Hello(), Ready: sb.client.Ready()}
	if !o.Stop {
		if err := vm.Resume(ctx); err != nil {
			resumed = true
			return sv, err
		}
		resumed = true
		sv.Paused = time.Since(tp)
		if err := thaw(); err != nil {
			return sv, err
		}
	} else {
		sv.Paused = time.Since(tp)
	}
	sv.Frozen = time.Since(t0)
	sb.guest.agent(store.AgentSnapshot, 1, fmt.Sprintf("%s: the guest paused %s", o.Reason, sv.Paused.Round(time.Millisecond)))
	return sv, nil
}

// thawTimeout bounds the Thaw that ends a save: the agent remounts the
// workspace and restarts its watcher (~0.2 s under TCG).
const thawTimeout = 30 * time.Second

// saveFiles writes the paused VM's files into o.Dir.
func saveFiles(ctx context.Context, vm vmSaver, o SaveOptions, disk string) error {
	f, err := os.OpenFile(filepath.Join(o.Dir, StateFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = vm.SaveState(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save the guest: %w", err)
	}
	ram, stale := RAMFile, RAMImageFile
	if o.Compress {
		ram, stale = stale, ram
	}
	_ = os.Remove(filepath.Join(o.Dir, stale)) // a restore would pick the wrong one
	if _, err := vm.SaveRAM(filepath.Join(o.Dir, ram), o.Compress); err != nil {
		return fmt.Errorf("save the guest's memory: %w", err)
	}
	if o.Disk && disk != "" {
		if _, err := hypervisor.CopySparse(filepath.Join(o.Dir, DiskFile), disk, 0o600); err != nil {
			return fmt.Errorf("save the guest's disk: %w", err)
		}
	}
	return nil
}

// thawNow is the Thaw a guest gets when it goes on: the host's clock, and
// fresh randomness for its kernel's pool (every fork of one snapshot
// starts from the same pool otherwise).
func thawNow(restored bool) proto.Thaw {
	seed := make([]byte, 64)
	_, _ = rand.Read(seed)
	return proto.Thaw{Time: time.Now().UnixNano(), Seed: seed, Restored: restored}
}

// Discard ends a sandbox whose guest cannot be spoken to any more (saved
// with SaveOptions.Stop): the VM is stopped at once, then everything else.
func (sb *Sandbox) Discard() {
	sb.teardown()
}
