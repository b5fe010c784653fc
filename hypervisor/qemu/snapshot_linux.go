package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/hypervisor/qemu/qmp"
)

// Snapshots under QEMU 7.2 (measured on a 2 GiB TCG guest, see
// docs/BENCHMARKS.md): the guest's RAM lives in a shared file on tmpfs
// (Config.RAMFile) and migration runs with x-ignore-shared, so the
// migration stream carries the device state only (75 KiB, 5–9 ms) and the
// RAM is copied sparse beside it while the guest is paused. Streaming
// the RAM instead paused the guest 3.5–4.2 s whatever it had touched
// (7.2's RAM save walks every page at ~9 µs), and its restore faulted in
// all 2 GiB. The stream goes to a descriptor passed over QMP (getfd +
// fd:): exec: would need the shell that -sandbox spawn=deny forbids, and
// 7.2 has no file: migration.

// migrateBandwidth lifts 7.2's default migration cap of 32 MiB/s, which
// would stretch even a device-only stream of a large guest.
const migrateBandwidth = 1 << 40

// qmpTimeout bounds one QMP exchange that is not a migration.
const qmpTimeout = 10 * time.Second

// Machine says what a snapshot of this VM can be restored into (see
// machine); "" before Start or when the VM has no QMP.
func (v *VM) Machine() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.qmp == nil {
		return ""
	}
	return machine(&v.cfg, v.target, v.accel, v.qmp.Version().String())
}

// monitor is the QMP connection, or why the VM has none.
func (v *VM) monitor() (*qmp.Conn, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.qmp == nil:
		return nil, errors.New("qemu: this VM cannot be snapshotted: it was started without its RAM in a file (hypervisor.Config.RAMFile)")
	case v.cfg.RAMFile == "":
		return nil, errors.New("qemu: this VM was restored copy-on-write from a snapshot and cannot be snapshotted again")
	}
	return v.qmp, nil
}

// Pause stops the guest's vCPUs (QMP stop). QEMU flushes the disks first.
func (v *VM) Pause(ctx context.Context) error {
	q, err := v.monitor()
	if err != nil {
		return err
	}
	return q.Execute(ctx, "stop", nil, nil)
}

// Resume lets a paused guest go on (QMP cont), also after SaveState.
func (v *VM) Resume(ctx context.Context) error {
	q, err := v.monitor()
	if err != nil {
		return err
	}
	return q.Execute(ctx, "cont", nil, nil)
}

// SaveState writes the paused guest's device state to f: the migration
// stream without RAM, which SaveRAM copies. QEMU refuses while the guest
// has the 9p workspace mounted; that refusal is returned as it is.
func (v *VM) SaveState(ctx context.Context, f *os.File) error {
	q, err := v.monitor()
	if err != nil {
		return err
	}
	if err := setMigration(ctx, q); err != nil {
		return err
	}
	if err := q.Execute(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": migrateBandwidth}, nil); err != nil {
		return err
	}
	if err := q.ExecuteFD(ctx, "getfd", map[string]any{"fdname": "snapshot"}, nil, f); err != nil {
		return err
	}
	if err := q.Execute(ctx, "migrate", map[string]any{"uri": "fd:snapshot"}, nil); err != nil {
		return err
	}
	for {
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := q.Execute(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("qemu: saving the guest's state failed: %s", st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			_ = q.Execute(context.Background(), "migrate_cancel", nil, nil)
			return fmt.Errorf("qemu: saving the guest's state: %w", ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// SaveRAM copies the paused guest's RAM file to dst (0600), sparse, or
// compressed as a RAM image (hypervisor.SaveRAMImage), and returns the
// bytes written.
func (v *VM) SaveRAM(dst string, compress bool) (int64, error) {
	if _, err := v.monitor(); err != nil {
		return 0, err
	}
	if compress {
		return hypervisor.SaveRAMImage(dst, v.cfg.RAMFile, 0o600)
	}
	return hypervisor.CopySparse(dst, v.cfg.RAMFile, 0o600)
}

// setMigration turns on x-ignore-shared: RAM in a shared file stays out of
// the stream, on the saving side and on the loading side alike.
func setMigration(ctx context.Context, q *qmp.Conn) error {
	return q.Execute(ctx, "migrate-set-capabilities", map[string]any{
		"capabilities": []map[string]any{{"capability": "x-ignore-shared", "state": true}},
	}, nil)
}

// connectQMP completes QMP's handshake on the host end of its socket.
func connectQMP(ctx context.Context, c net.Conn) (*qmp.Conn, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("qemu: QMP socket is a %T", c)
	}
	ctx, cancel := context.WithTimeout(ctx, qmpTimeout)
	defer cancel()
	return qmp.New(ctx, uc, qmp.Options{})
}

// restore loads cfg.Restore into the just-started QEMU (-incoming defer)
// and lets the guest go on: the saved guest was paused, so the loaded one
// is too until cont. A snapshot of another machine is refused first.
func (v *VM) restore(ctx context.Context, q *qmp.Conn) error {
	r := v.cfg.Restore
	if have := machine(&v.cfg, v.target, v.accel, q.Version().String()); have != r.Machine {
		return fmt.Errorf("qemu: the snapshot was saved on another machine (%q), this one is %q: start the sandbox cold, or from a snapshot made with this capsem and QEMU", r.Machine, have)
	}
	f, err := os.Open(r.State)
	if err != nil {
		return fmt.Errorf("qemu: snapshot state: %w", err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, v.cfg.BootTimeout)
	defer cancel()
	// Loading the devices reads guest memory (the virtqueues): the RAM
	// must be all there first.
	select {
	case <-v.ramCopied:
		if v.ramErr != nil {
			return v.ramErr
		}
	case <-ctx.Done():
		return fmt.Errorf("qemu: copying the snapshot's RAM: %w", ctx.Err())
	}
	if err := setMigration(ctx, q); err != nil {
		return err
	}
	if err := q.ExecuteFD(ctx, "getfd", map[string]any{"fdname": "snapshot"}, nil, f); err != nil {
		return err
	}
	if err := q.Execute(ctx, "migrate-incoming", map[string]any{"uri": "fd:snapshot"}, nil); err != nil {
		return err
	}
	for {
		var st struct {
			Status string `json:"status"`
		}
		if err := q.Execute(ctx, "query-status", nil, &st); err != nil {
			return fmt.Errorf("qemu: loading the snapshot: %w", err)
		}
		switch st.Status {
		case "inmigrate":
			time.Sleep(2 * time.Millisecond)
			continue
		case "paused", "postmigrate", "prelaunch":
			return q.Execute(ctx, "cont", nil, nil)
		case "running":
			return nil
		default:
			return fmt.Errorf("qemu: loading the snapshot left the VM %s", st.Status)
		}
	}
}

// prepareRAM makes cfg.RAMFile, at the guest's memory size, before QEMU
// maps it. For a restore that is not private the snapshot's RAM is copied
// into it while QEMU starts (its ~110 ms of start-up and the copy of a
// booted guest's ~125 MiB overlap); v.ramCopied is closed when the copy
// is done, its error in v.ramErr. Start holds v.mu.
func (v *VM) prepareRAM() error {
	v.ramCopied = make(chan struct{})
	if v.cfg.RAMFile == "" {
		close(v.ramCopied)
		return nil
	}
	f, err := os.OpenFile(v.cfg.RAMFile, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		err = f.Truncate(int64(v.cfg.MemoryMiB) << 20)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return fmt.Errorf("guest RAM file: %w", err)
	}
	r := v.cfg.Restore
	if r == nil || r.Private {
		close(v.ramCopied)
		return f.Close()
	}
	go func() {
		defer close(v.ramCopied)
		t0 := time.Now()
		copyInto := hypervisor.CopySparseInto
		if r.Compressed {
			copyInto = hypervisor.LoadRAMImage
		}
		n, err := copyInto(f, r.RAM)
		v.log.Debug("qemu: the snapshot's RAM copied", "bytes", n, "took", time.Since(t0))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			v.ramErr = fmt.Errorf("qemu: the snapshot's RAM: %w", err)
		}
	}()
	return nil
}

// removeRAM removes the RAM file once QEMU no longer maps it.
func (v *VM) removeRAM() {
	if v.cfg.RAMFile != "" {
		_ = os.Remove(v.cfg.RAMFile)
	}
}

// startQMP connects to the started QEMU's monitor and, for a restore,
// loads the snapshot. Start holds v.mu.
func (v *VM) startQMP(ctx context.Context, c net.Conn) error {
	q, err := connectQMP(ctx, c)
	if err != nil {
		return fmt.Errorf("qemu: %w%s", err, v.stderr.suffix())
	}
	v.qmp = q
	if v.cfg.Restore == nil {
		return nil
	}
	v.log.Debug("qemu: monitor connected, loading the snapshot")
	if err := v.restore(ctx, q); err != nil {
		return fmt.Errorf("%w%s", err, v.stderr.suffix())
	}
	return nil
}
