package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/store"
)

// A boot snapshot is a guest booted to agent-ready and saved before any
// command ran or any workspace was mounted: a start restores it instead of
// booting the kernel (measured under TCG: a restore answers in ~0.2 s, a
// boot in ~2.8 s). One is made per machine a start asks for — the image,
// the capsem that boots it, the CA the guest trusts, CPUs, memory and the
// devices — under a key of all of them, so that a change of any makes
// another:
//
//	<root>/<key>/        state, ram (and disk.ext4 with a data disk): what Save writes
//	  boot.json          its record (bootRecord), written last
//
// Stability: a cache; a directory that does not read as this build's is
// made again.

// bootRecord is a boot snapshot's boot.json.
type bootRecord struct {
	Key     string      `json:"key"`
	Created time.Time   `json:"created"`
	Machine string      `json:"machine"`
	Agent   proto.Hello `json:"agent"`
	Ready   proto.Ready `json:"ready"`
}

// bootRecordFile names a boot snapshot's record.
const bootRecordFile = "boot.json"

// bootSnapshotsKept bounds the boot snapshots kept under a root: each is
// the ~125 MiB a booted guest touched; the least recently made go first,
// but none made within bootSnapshotGrace, which a start may be restoring
// (a restore reads its files while QEMU starts).
const (
	bootSnapshotsKept = 4
	bootSnapshotGrace = time.Hour
)

// BootKey names the boot snapshot cfg's guest can be restored from: what
// its machine and its booted memory depend on.
func BootKey(cfg *Config) string {
	h := sha256.New()
	debug := cfg.Logger != nil && cfg.Logger.Enabled(context.Background(), slog.LevelDebug)
	fmt.Fprintf(h, "capsem boot snapshot 1\nimage %s\nhost %s\nca %x\ncpus %d\nmem %d\ndata %d\ntransfer %v\nworkspace %v\ndebug %v\nmtu %d\n",
		cfg.Guest.ID, cfg.Host, sha256.Sum256(cfg.Authority.Certificate().Raw), cfg.CPUs, cfg.MemoryMiB,
		diskSize(cfg.DataDisk), cfg.TransferDisk != "", cfg.Workspace != "", debug, netstack.DefaultMTU)
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// diskSize is the size of the data disk at path, -1 for none.
func diskSize(path string) int64 {
	if path == "" {
		return -1
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// BootSnapshot returns the restore of cfg's boot snapshot under root,
// making it first when there is none (a cold boot and a save: a few
// seconds, once). The restore is private (copy-on-write over the saved
// RAM, which every restore shares), so the guest it starts cannot be
// saved again. With cfg.DataDisk the snapshot holds a data disk of its
// size as the booted guest left it (DiskFile): a restore needs that disk,
// not cfg's (supervisor.FromBoot copies it into a new sandbox).
func BootSnapshot(ctx context.Context, root string, cfg Config) (*Restore, error) {
	if !filepath.IsAbs(root) {
		// "" from a cache directory that could not be found would put
		// the snapshot in the working directory.
		return nil, fmt.Errorf("sandbox: the boot snapshots' directory %q is not an absolute path (is $HOME or $XDG_CACHE_HOME set?)", root)
	}
	key := BootKey(&cfg)
	dir := filepath.Join(root, key)
	if r, ok := readBootSnapshot(dir, key); ok {
		return r, nil
	}
	if err := makeBootSnapshot(ctx, dir, key, cfg); err != nil {
		return nil, fmt.Errorf("sandbox: make the boot snapshot: %w", err)
	}
	pruneBootSnapshots(root, key)
	r, ok := readBootSnapshot(dir, key)
	if !ok {
		return nil, errors.New("sandbox: the boot snapshot just made does not read back")
	}
	return r, nil
}

// DropBootSnapshot removes cfg's boot snapshot under root (a restore of
// it failed: it is made again next time).
func DropBootSnapshot(root string, cfg Config) { _ = os.RemoveAll(filepath.Join(root, BootKey(&cfg))) }

func readBootSnapshot(dir, key string) (*Restore, bool) {
	b, err := os.ReadFile(filepath.Join(dir, bootRecordFile))
	if err != nil {
		return nil, false
	}
	var rec bootRecord
	if json.Unmarshal(b, &rec) != nil || rec.Key != key || rec.Machine == "" {
		return nil, false
	}
	return &Restore{
		Dir:     dir,
		Saved:   Saved{Machine: rec.Machine, Agent: rec.Agent, Ready: rec.Ready},
		Private: true,
	}, true
}

// makeBootSnapshot boots cfg's guest with nothing recorded and nothing
// mounted, saves it into dir and ends it.
func makeBootSnapshot(ctx context.Context, dir, key string, cfg Config) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	partial, err := os.MkdirTemp(filepath.Dir(dir), key+".partial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(partial)
	if cfg.RAMFile, err = RAMFilePath("boot-"+key, cfg.MemoryMiB); err != nil {
		return err
	}
	cfg.Restore = nil
	cfg.DeferWorkspace = true
	cfg.Recorder = noRecord{}
	cfg.ConsoleLog = filepath.Join(partial, "console.log")
	save := SaveOptions{Dir: partial, Stop: true, Reason: "capsem boot snapshot"}
	if cfg.DataDisk != "" {
		// Its own disk, fresh, as a new sandbox's is; saved beside the
		// memory that has it mounted.
		live := filepath.Join(partial, "live.ext4")
		if err := image.CreateDataDisk(ctx, live, diskSize(cfg.DataDisk)); err != nil {
			return err
		}
		defer os.Remove(live)
		cfg.DataDisk, save.Disk = live, true
	}
	if cfg.TransferDisk != "" {
		cfg.TransferDisk = filepath.Join(partial, "transfer.img")
		if err := MakeTransferDisk(cfg.TransferDisk); err != nil {
			return err
		}
		defer os.Remove(cfg.TransferDisk)
	}
	if cfg.Workspace != "" {
		// The device is attached (the restored machine has one) and
		// never mounted: any directory serves.
		cfg.Workspace = partial
	}
	sb, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	sv, err := sb.Save(ctx, save)
	sb.Discard()
	if err != nil {
		return err
	}
	_ = os.Remove(cfg.ConsoleLog)
	_ = os.Remove(cfg.DataDisk)
	_ = os.Remove(cfg.TransferDisk)
	rec, err := json.Marshal(bootRecord{Key: key, Created: time.Now().UTC(), Machine: sv.Machine, Agent: sv.Agent, Ready: sv.Ready})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(partial, bootRecordFile), rec, 0o600); err != nil {
		return err
	}
	_ = os.RemoveAll(dir) // a stale one that did not read back
	if err := os.Rename(partial, dir); err != nil {
		if _, ok := readBootSnapshot(dir, key); ok {
			return nil // another start made it meanwhile
		}
		return err
	}
	return nil
}

// pruneBootSnapshots keeps the bootSnapshotsKept newest boot snapshots
// under root (keep among them) and those younger than bootSnapshotGrace,
// and removes partial ones of dead makers.
func pruneBootSnapshots(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type snap struct {
		name string
		mod  time.Time
	}
	var all []snap
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() || e.Name() == keep {
			continue
		}
		if filepath.Ext(e.Name()) != "" || len(e.Name()) != 24 {
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.RemoveAll(filepath.Join(root, e.Name())) // a maker that died
			}
			continue
		}
		all = append(all, snap{e.Name(), info.ModTime()})
	}
	slices.SortFunc(all, func(a, b snap) int { return b.mod.Compare(a.mod) })
	for i, s := range all {
		if i >= bootSnapshotsKept-1 && time.Since(s.mod) > bootSnapshotGrace {
			_ = os.RemoveAll(filepath.Join(root, s.name))
		}
	}
}

// noRecord records nothing and admits no flow: a boot snapshot's guest
// is booted to be saved, not used.
type noRecord struct{}

func (noRecord) Append(store.Event) {}
func (noRecord) Admit() error {
	return errors.New("a boot snapshot's guest has no network")
}

// StartFromBoot starts cfg's guest from its boot snapshot under root,
// making it first when there is none, and boots the kernel instead when
// that fails (the snapshot is then dropped, to be made again): a guest
// from a boot snapshot is a booted guest, just sooner.
func StartFromBoot(ctx context.Context, root string, cfg Config) (*Sandbox, error) {
	r, err := BootSnapshot(ctx, root, cfg)
	if err == nil {
		c := cfg
		c.Restore = r
		var sb *Sandbox
		if sb, err = Start(ctx, c); err == nil {
			return sb, nil
		}
		DropBootSnapshot(root, cfg)
	}
	if ctx.Err() != nil {
		return nil, err
	}
	cfg.Logger.Warn("the boot snapshot could not be used; booting the kernel", "err", err)
	return Start(ctx, cfg)
}
