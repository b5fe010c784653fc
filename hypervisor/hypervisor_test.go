package hypervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateDefaults(t *testing.T) {
	dir := t.TempDir()
	k := filepath.Join(dir, "vmlinux")
	if err := os.WriteFile(k, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Config{Kernel: k, Workspace: dir}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.CPUs != 1 || c.MemoryMiB != 512 || c.MAC != DefaultMAC || c.BootTimeout != DefaultBootTimeout {
		t.Fatalf("defaults not filled: %+v", c)
	}
}

func TestValidateRejects(t *testing.T) {
	dir := t.TempDir()
	k := filepath.Join(dir, "vmlinux")
	if err := os.WriteFile(k, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"no kernel":              {},
		"missing kernel":         {Kernel: filepath.Join(dir, "nope")},
		"kernel is a dir":        {Kernel: dir},
		"missing initramfs":      {Kernel: k, Initramfs: filepath.Join(dir, "nope")},
		"workspace file":         {Kernel: k, Workspace: k},
		"too many CPUs":          {Kernel: k, CPUs: 1000},
		"too little memory":      {Kernel: k, MemoryMiB: 8},
		"cmdline space":          {Kernel: k, Cmdline: []string{"a b"}},
		"cmdline empty":          {Kernel: k, Cmdline: []string{""}},
		"capsem word in cmdline": {Kernel: k, Cmdline: []string{"capsem.ip=none"}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
}

func TestBaseCmdline(t *testing.T) {
	got := strings.Join(BaseCmdline(2600000), " ")
	want := "console=ttyS0 panic=-1 quiet loglevel=1 tsc_early_khz=2600000 mitigations=off no_timer_check audit=0 8250.nr_uarts=1 random.trust_cpu=on"
	if got != want {
		t.Fatalf("BaseCmdline:\n got %s\nwant %s", got, want)
	}
	if s := strings.Join(BaseCmdline(0), " "); strings.Contains(s, "tsc_early_khz") {
		t.Fatalf("unknown TSC rate still set tsc_early_khz: %s", s)
	}
}
