package supervisor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// FromBoot makes the new sandbox d (Prepare'd, never started) start from
// the boot snapshot of its machine under root instead of booting: the
// snapshot's disk becomes d's (a new sandbox's disk is a fresh one too, as
// the booted guest left it) and its saved guest d's suspended state,
// which the first start resumes (a copy of its RAM in tmpfs, so that d
// can be snapshotted in turn). The boot snapshot is made first when there
// is none. It returns the boot snapshot's directory: when its restore
// fails, the caller removes it, to be made again.
func FromBoot(ctx context.Context, d home.Dir, root string, o Options) (string, error) {
	s, err := d.ReadSettings()
	if err != nil {
		return "", err
	}
	pol, err := sandbox.LoadPolicy("", nil) // the boot snapshot's guest makes no flow
	if err != nil {
		return "", err
	}
	authority, err := sandbox.LoadAuthority(o.CADir)
	if err != nil {
		return "", err
	}
	// The boot is quiet, at the level the supervisor logs at: the guest's
	// debug output is part of what it boots with.
	level := slog.LevelInfo
	if o.Log != nil && o.Log.Enabled(ctx, slog.LevelDebug) {
		level = slog.LevelDebug
	}
	cfg := sandbox.Config{
		Guest: d.Guest(s), Policy: pol, Authority: authority, Host: o.Host,
		Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: level})),
		CPUs:   s.CPUs, MemoryMiB: s.MemoryMiB, Workspace: s.Workspace,
		DataDisk: d.Disk(), TransferDisk: d.TransferDisk(), BootTimeout: hypervisor.DefaultBootTimeout,
	}
	r, err := sandbox.BootSnapshot(ctx, root, cfg)
	if err != nil {
		return "", err
	}
	if _, err := hypervisor.CopySparse(d.Disk(), filepath.Join(r.Dir, sandbox.DiskFile), 0o600); err != nil {
		return "", fmt.Errorf("the sandbox's disk from the boot snapshot: %w", err)
	}
	m := api.Snapshot{
		Sandbox: d.Name, Created: time.Now().UTC(), Image: s.Image, Capsem: o.Host,
		Machine: r.Saved.Machine, CPUs: s.CPUs, MemoryMiB: s.MemoryMiB,
		Agent: r.Saved.Agent, Ready: r.Saved.Ready,
	}
	return r.Dir, stageSuspended(d, r.Dir, m)
}
