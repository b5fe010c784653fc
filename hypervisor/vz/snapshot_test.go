package vz

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/capsem/capsem/hypervisor"
)

// onMac pretends, for one test, to run on a Mac with macOS osv where the
// binding has the snapshot API or not.
func onMac(t *testing.T, osv string, api bool) {
	t.Helper()
	oldOS, oldAPI := hostMacOS, snapshotAPI
	hostMacOS = func() (string, error) { return osv, nil }
	snapshotAPI = api
	t.Cleanup(func() { hostMacOS, snapshotAPI = oldOS, oldAPI })
}

func TestMachineName(t *testing.T) {
	nic, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer nic.Close()
	for _, c := range []struct {
		cfg  hypervisor.Config
		opts Options
		osv  string
		want string
	}{
		{hypervisor.Config{CPUs: 1, MemoryMiB: 512}, Options{}, "14.4.1",
			"vz 14.4 arm64 cpus=1 mem=512M devices=console,rng,vsock"},
		{hypervisor.Config{CPUs: 4, MemoryMiB: 2048, RootImage: "/r", DataDisk: "/d", TransferDisk: "/t", NIC: nic, Workspace: "/w"}, Options{MTU: 1500}, "15.0",
			"vz 15.0 arm64 cpus=4 mem=2048M devices=console,rng,root,data,transfer,net,virtiofs,vsock"},
		{hypervisor.Config{CPUs: 2, MemoryMiB: 1024, RootImage: "/r", NIC: nic, Workspace: "/w", WorkspaceReadOnly: true}, Options{MTU: 9000}, "26",
			"vz 26 arm64 cpus=2 mem=1024M devices=console,rng,root,net(mtu=9000),virtiofs(ro),vsock"},
	} {
		p := layout(&c.cfg, &c.opts)
		if got := machineName(&p, c.osv, "arm64"); got != c.want {
			t.Errorf("machineName:\n got %s\nwant %s", got, c.want)
		}
	}
	// Paths are not part of it: another copy of the disk restores.
	a := hypervisor.Config{CPUs: 1, MemoryMiB: 512, RootImage: "/a", DataDisk: "/a.ext4", Workspace: "/a"}
	b := hypervisor.Config{CPUs: 1, MemoryMiB: 512, RootImage: "/b", DataDisk: "/b.ext4", Workspace: "/b"}
	pa, pb := layout(&a, &Options{}), layout(&b, &Options{})
	if machineName(&pa, "14.5", "arm64") != machineName(&pb, "14.5", "arm64") {
		t.Error("machineName depends on paths")
	}
}

// TestSnapshotNotBuilt: a VM of a build without the framework (the stub's
// New never returns one, but its methods are there) can do nothing.
func TestSnapshotNotBuilt(t *testing.T) {
	v, err := newVM(testConfig(t), Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if m := v.Machine(); m != "" {
		t.Errorf("Machine = %q, want \"\"", m)
	}
	ctx := context.Background()
	f, err := os.Create(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, ramErr := v.SaveRAM(filepath.Join(t.TempDir(), "ram"), false)
	for what, err := range map[string]error{
		"Pause": v.Pause(ctx), "Resume": v.Resume(ctx), "SaveState": v.SaveState(ctx, f), "SaveRAM": ramErr,
	} {
		if !errors.Is(err, ErrNotBuilt) || !strings.HasPrefix(err.Error(), "vz: ") {
			t.Errorf("%s: %v, want vz: …ErrNotBuilt", what, err)
		}
	}
}

func TestSnapshotBeforeStart(t *testing.T) {
	onMac(t, "14.4", true)
	f := newFake()
	v := newTestVM(t, testConfig(t), Options{}, f)
	if m := v.Machine(); m != "" {
		t.Errorf("Machine before Start = %q", m)
	}
	if err := v.Pause(context.Background()); err == nil || !strings.Contains(err.Error(), "start it before") {
		t.Errorf("Pause before Start: %v", err)
	}
}

func startFake(t *testing.T, cfg hypervisor.Config, f *fakeMachine) *VM {
	t.Helper()
	v := newTestVM(t, cfg, Options{}, f)
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Stop(context.Background()) })
	return v
}

func TestSave(t *testing.T) {
	onMac(t, "14.4.1", true)
	f := newFake()
	f.saved = []byte("the whole machine")
	v := startFake(t, testConfig(t), f)
	if got, want := v.Machine(), "vz 14.4 "+runtime.GOARCH+" cpus=1 mem=512M devices=console,rng,vsock"; got != want {
		t.Errorf("Machine = %q, want %q", got, want)
	}
	ctx := context.Background()
	dir := t.TempDir()
	if err := v.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	// As sandbox.Save opens it.
	state := filepath.Join(dir, "state")
	sf, err := os.OpenFile(state, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.SaveState(ctx, sf); err != nil {
		t.Fatal(err)
	}
	sf.Close()
	n, err := v.SaveRAM(filepath.Join(dir, "ram"), false)
	if err != nil || n != 0 {
		t.Fatalf("SaveRAM = %d, %v; want 0, nil", n, err)
	}
	if err := v.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(state); err != nil || string(b) != "the whole machine" {
		t.Errorf("state file: %q, %v", b, err)
	}
	for _, name := range []string{"state", "ram"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
		if name == "ram" && st.Size() != 0 {
			t.Errorf("ram: %d bytes, want an empty file", st.Size())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("left in the snapshot directory: %v", ents)
	}
	if got, want := f.called(), []string{"start", "pause", "save", "resume"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

// TestSaveStateNeedsPath: the framework saves to a path, so a file that is
// not the one at its name is refused.
func TestSaveStateNeedsPath(t *testing.T) {
	onMac(t, "14.4", true)
	f := newFake()
	v := startFake(t, testConfig(t), f)
	dir := t.TempDir()
	sf, err := os.Create(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	if err := os.Rename(sf.Name(), filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := v.SaveState(context.Background(), sf); err == nil || !strings.Contains(err.Error(), "open it by path") {
		t.Errorf("SaveState of a moved file: %v", err)
	}
	if slices.Contains(f.called(), "save") {
		t.Error("the framework was asked to save")
	}
}

func TestSaveRefused(t *testing.T) {
	for _, c := range []struct {
		name, osv string
		api       bool
		want      string
	}{
		{"old macOS", "13.6.1", true, "vz: snapshots need macOS 14 or later, this Mac runs macOS 13.6.1: update macOS, or start the sandbox cold"},
		{"Intel", "14.4", false, "vz: snapshots need Apple silicon"},
	} {
		t.Run(c.name, func(t *testing.T) {
			onMac(t, c.osv, c.api)
			f := newFake()
			v := startFake(t, testConfig(t), f)
			err := v.Pause(context.Background())
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("Pause: %v, want %s…", err, c.want)
			}
			if got := f.called(); !slices.Equal(got, []string{"start"}) {
				t.Errorf("calls %v: the guest was paused", got)
			}
		})
	}
}

// restoreConfig is testConfig restoring a snapshot saved as machine.
func restoreConfig(t *testing.T, machine string) hypervisor.Config {
	t.Helper()
	cfg := testConfig(t)
	dir := t.TempDir()
	r := &hypervisor.Restore{State: filepath.Join(dir, "state"), RAM: filepath.Join(dir, "ram"), Private: true, Machine: machine}
	for _, p := range []string{r.State, r.RAM} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Restore = r
	return cfg
}

func TestRestore(t *testing.T) {
	onMac(t, "14.5", true)
	f := newFake()
	v := startFake(t, restoreConfig(t, "vz 14.5 "+runtime.GOARCH+" cpus=1 mem=512M devices=console,rng,vsock"), f)
	if got, want := f.called(), []string{"restore state", "resume"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v (restored and resumed, not booted)", got, want)
	}
	if v.Machine() == "" {
		t.Error("a restored VM cannot be snapshotted again")
	}
}

func TestRestoreRefused(t *testing.T) {
	this := "vz 14.5 " + runtime.GOARCH + " cpus=1 mem=512M devices=console,rng,vsock"
	for _, c := range []struct {
		name, osv, machine string
		api                bool
		want               string
	}{
		{"other machine", "14.5", "vz 14.5 " + runtime.GOARCH + " cpus=2 mem=512M devices=console,rng,vsock", true,
			"vz: the snapshot was saved on another machine"},
		{"other macOS", "15.0", this, true, "vz: the snapshot was saved on another machine"},
		{"a qemu snapshot", "14.5", "qemu 7.2.0 microvm accel=tcg cpu=max smp=1 mem=512M devices=serial,control", true,
			"vz: the snapshot was saved on another machine"},
		{"old macOS", "13.6", "vz 13.6 " + runtime.GOARCH + " cpus=1 mem=512M devices=console,rng,vsock", true,
			"vz: snapshots need macOS 14 or later"},
		{"Intel", "14.5", this, false, "vz: snapshots need Apple silicon"},
	} {
		t.Run(c.name, func(t *testing.T) {
			onMac(t, c.osv, c.api)
			f := newFake()
			built := false
			v := newTestVM(t, restoreConfig(t, c.machine), Options{}, f)
			v.build = func() (machine, error) { built = true; return f, nil }
			err := v.Start(context.Background())
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || !strings.Contains(err.Error(), "start the sandbox cold") {
				t.Fatalf("Start: %v, want %s… start the sandbox cold", err, c.want)
			}
			if built {
				t.Error("the framework VM was built before the refusal")
			}
		})
	}
}

func TestRestoreFails(t *testing.T) {
	onMac(t, "14.5", true)
	f := newFake()
	f.restoreErr = errors.New("the file is not compatible")
	v := newTestVM(t, restoreConfig(t, "vz 14.5 "+runtime.GOARCH+" cpus=1 mem=512M devices=console,rng,vsock"), Options{}, f)
	err := v.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the file is not compatible: start the sandbox cold") {
		t.Fatalf("Start: %v", err)
	}
	if f.released.Load() != 1 {
		t.Errorf("released %d times, want 1", f.released.Load())
	}
	if got := f.called(); !slices.Equal(got, []string{"restore state"}) {
		t.Errorf("calls %v", got)
	}
}
