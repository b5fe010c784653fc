package qemu

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

func TestBuildArgsFull(t *testing.T) {
	cfg := &hypervisor.Config{
		Kernel:      "/k/vmlinux",
		Initramfs:   "/k/initrd",
		RootImage:   "/img/root,1.erofs",
		Boot:        bootparam.BootParams{IP: netip.MustParsePrefix("198.18.0.2/24"), Gateway: netip.MustParseAddr("198.18.0.1")},
		CPUs:        2,
		MemoryMiB:   1024,
		MAC:         hypervisor.DefaultMAC,
		Workspace:   "/home/u/proj",
		ConsoleLog:  "/tmp/console.log",
		NIC:         os.Stdin, // only its presence matters here
		BootTimeout: 1,
	}
	got := buildArgs(cfg, amd64, Accel{Name: "tcg"}, 2600000, layoutFor(true, true, false), startFacts{runAs: "1000:1000"})
	want := []string{
		"-M", "microvm",
		"-accel", "tcg,thread=multi",
		"-cpu", "max",
		"-smp", "2",
		"-m", "1024M",
		"-no-reboot", "-nodefaults", "-no-user-config", "-nographic",
		"-sandbox", "on,obsolete=deny,elevateprivileges=allow,spawn=deny,resourcecontrol=deny",
		"-kernel", "/k/vmlinux",
		"-runas", "1000:1000",
		"-initrd", "/k/initrd",
		"-append", "console=ttyS0 panic=-1 quiet loglevel=1 tsc_early_khz=2600000 mitigations=off no_timer_check audit=0 8250.nr_uarts=1 random.trust_cpu=on capsem.root=/dev/vda capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.ws=9p",
		"-chardev", "socket,id=console,fd=5",
		"-serial", "chardev:console",
		"-chardev", "socket,id=control,fd=4",
		"-device", "virtio-serial-device,max_ports=2",
		"-device", "virtserialport,chardev=control,name=capsem.control",
		"-netdev", "stream,id=net0,addr.type=fd,addr.str=3",
		"-device", "virtio-net-device,netdev=net0,mac=02:ca:95:e0:00:02",
		"-drive", "file=/img/root,,1.erofs,if=none,id=root,format=raw,readonly=on",
		"-device", "virtio-blk-device,drive=root",
		"-fsdev", "local,id=workspace,path=/home/u/proj,security_model=mapped-xattr,fmode=0644,dmode=0755",
		"-device", "virtio-9p-device,fsdev=workspace,mount_tag=workspace",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("args:\n got %q\nwant %q", got, want)
	}
}

// TestBuildArgsARM64 is the same guest on arm64: virt with its devices on
// PCI (the module list vz shares), the PL011 as the console, no TSC.
func TestBuildArgsARM64(t *testing.T) {
	cfg := &hypervisor.Config{
		Kernel:     "/k/Image",
		Initramfs:  "/k/initrd",
		RootImage:  "/img/root.erofs",
		DataDisk:   "/d.ext4",
		CPUs:       2,
		MemoryMiB:  1024,
		MAC:        hypervisor.DefaultMAC,
		Workspace:  "/home/u/proj",
		ConsoleLog: "/tmp/console.log",
		NIC:        os.Stdin,
	}
	arm, _ := targetFor(arch.ARM64)
	got := buildArgs(cfg, arm, Accel{Name: "tcg"}, 0, layoutFor(true, true, false), startFacts{})
	want := []string{
		"-M", "virt",
		"-accel", "tcg,thread=multi",
		"-cpu", "max,pauth-impdef=on",
		"-smp", "2",
		"-m", "1024M",
		"-no-reboot", "-nodefaults", "-no-user-config", "-nographic",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-kernel", "/k/Image",
		"-initrd", "/k/initrd",
		"-append", "console=ttyS0 panic=-1 quiet loglevel=1 mitigations=off no_timer_check audit=0 8250.nr_uarts=1 random.trust_cpu=on console=ttyAMA0 capsem.root=/dev/vda capsem.rw=/dev/vdb capsem.ws=9p",
		"-chardev", "socket,id=console,fd=5",
		"-serial", "chardev:console",
		"-chardev", "socket,id=control,fd=4",
		"-device", "virtio-serial-pci,max_ports=2",
		"-device", "virtserialport,chardev=control,name=capsem.control",
		"-netdev", "stream,id=net0,addr.type=fd,addr.str=3",
		"-device", "virtio-net-pci,netdev=net0,mac=02:ca:95:e0:00:02",
		"-drive", "file=/img/root.erofs,if=none,id=root,format=raw,readonly=on",
		"-device", "virtio-blk-pci,drive=root",
		"-drive", "file=/d.ext4,if=none,id=data,format=raw,discard=unmap,cache=writeback",
		"-device", "virtio-blk-pci,drive=data",
		"-fsdev", "local,id=workspace,path=/home/u/proj,security_model=mapped-xattr,fmode=0644,dmode=0755",
		"-device", "virtio-9p-pci,fsdev=workspace,mount_tag=workspace",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("args:\n got %q\nwant %q", got, want)
	}
	if a := probeAccel(hostPaths, arch.AMD64, arch.ARM64); a.KVM() || !strings.Contains(a.Reason, "emulated") {
		t.Errorf("an arm64 guest on an x86-64 host: %+v, want TCG because it is emulated", a)
	}
}

func TestBuildArgsMinimalKVM(t *testing.T) {
	cfg := &hypervisor.Config{Kernel: "/k/vmlinux", CPUs: 1, MemoryMiB: 512, MAC: hypervisor.DefaultMAC, WorkspaceReadOnly: true}
	got := strings.Join(buildArgs(cfg, amd64, Accel{Name: "kvm"}, 0, layoutFor(false, false, false), startFacts{}), " ")
	for _, want := range []string{
		"-accel kvm -cpu host",
		"-chardev null,id=console -serial chardev:console",
		"-chardev socket,id=control,fd=3 ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"-netdev", "-initrd", "-drive", "-fsdev", "tsc_early_khz", "root=", "-nic", "user,", "tap,"} {
		if strings.Contains(got, bad) {
			t.Errorf("minimal args contain %q:\n%s", bad, got)
		}
	}
}

func TestBuildArgsWorkspaceReadOnly(t *testing.T) {
	cfg := &hypervisor.Config{Kernel: "/k", CPUs: 1, MemoryMiB: 512, Workspace: "/w", WorkspaceReadOnly: true}
	got := buildArgs(cfg, amd64, Accel{Name: "tcg"}, 0, layoutFor(false, false, false), startFacts{})
	if !slices.Contains(got, "local,id=workspace,path=/w,security_model=mapped-xattr,fmode=0644,dmode=0755,readonly=on") {
		t.Fatalf("read-only workspace not exported read-only: %q", got)
	}
}

func TestKernelCmdlineRoot(t *testing.T) {
	cfg := &hypervisor.Config{Kernel: "/k", RootImage: "/r"}
	if got := kernelCmdline(cfg, amd64, 0); !strings.HasSuffix(got, " root=/dev/vda ro") {
		t.Errorf("no initramfs: %s", got)
	}
	cfg.Initramfs = "/i"
	if got := kernelCmdline(cfg, amd64, 0); !strings.HasSuffix(got, " capsem.root=/dev/vda") || strings.Contains(got, " root=") {
		t.Errorf("with an initramfs: %s", got)
	}
}

// A data disk is the second virtio-blk device, writable, its discards
// punched into the host file, and the guest is told it is its root's
// writable layer.
func TestDataDisk(t *testing.T) {
	cfg := &hypervisor.Config{Kernel: "/k", Initramfs: "/i", RootImage: "/r", DataDisk: "/d,1.ext4"}
	got := buildArgs(cfg, amd64, Accel{Name: "tcg"}, 0, layoutFor(false, false, false), startFacts{})
	root := slices.Index(got, "virtio-blk-device,drive=root")
	data := slices.Index(got, "virtio-blk-device,drive=data")
	if root < 0 || data < root {
		t.Fatalf("the data disk must be attached after the root image (it is %s): %q", hypervisor.DataDevice, got)
	}
	if !slices.Contains(got, "file=/d,,1.ext4,if=none,id=data,format=raw,discard=unmap,cache=writeback") {
		t.Errorf("data drive: %q", got)
	}
	if line := kernelCmdline(cfg, amd64, 0); !strings.HasSuffix(line, "capsem.root=/dev/vda capsem.rw=/dev/vdb") {
		t.Errorf("kernel command line: %s", line)
	}
	cfg.TransferDisk = "/x"
	got = buildArgs(cfg, amd64, Accel{Name: "tcg"}, 0, layoutFor(false, false, false), startFacts{})
	if xfer := slices.Index(got, "virtio-blk-device,drive=transfer"); xfer < slices.Index(got, "virtio-blk-device,drive=data") {
		t.Errorf("the transfer disk must be the third (%s): %q", hypervisor.TransferDevice, got)
	}
}

func TestOptEscape(t *testing.T) {
	if got := optEscape("/a,b,,c"); got != "/a,,b,,,,c" {
		t.Fatalf("optEscape = %q", got)
	}
}

func TestProbeAccel(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vmx := write("cpuinfo-vmx", "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr vmx ept\n\nprocessor\t: 1\nflags\t\t: fpu vmx\n")
	svm := write("cpuinfo-svm", "flags\t\t: fpu svm npt\n")
	none := write("cpuinfo-none", "flags\t\t: fpu vme hypervisor tsc_known_freq\nvmx flags\t: ept vpid\n")
	kvm := write("kvm", "")
	pvmDir := filepath.Join(dir, "kvm_pvm")
	if err := os.Mkdir(pvmDir, 0o755); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(dir, "absent")

	for _, tc := range []struct {
		name  string
		p     probePaths
		want  string
		cause string
	}{
		{"vmx", probePaths{vmx, absent, kvm}, "kvm", ""},
		{"svm", probePaths{svm, absent, kvm}, "kvm", ""},
		// A "vmx flags" line is not the flags line: no vmx in flags.
		{"no flag", probePaths{none, absent, kvm}, "tcg", "no vmx/svm"},
		{"pvm", probePaths{vmx, pvmDir, kvm}, "tcg", "PVM"},
		{"no /dev/kvm", probePaths{vmx, absent, absent}, "tcg", "does not exist"},
		{"no cpuinfo", probePaths{absent, absent, kvm}, "tcg", "cannot read"},
	} {
		got := probeAccel(tc.p, arch.AMD64, arch.AMD64)
		if got.Name != tc.want || !strings.Contains(got.Reason, tc.cause) {
			t.Errorf("%s: got %+v, want %s (%q)", tc.name, got, tc.want, tc.cause)
		}
	}
	if os.Geteuid() != 0 {
		ro := write("kvm-ro", "")
		if err := os.Chmod(ro, 0o400); err != nil {
			t.Fatal(err)
		}
		if got := probeAccel(probePaths{vmx, absent, ro}, arch.AMD64, arch.AMD64); got.Name != "tcg" || !strings.Contains(got.Reason, "read-write") {
			t.Errorf("read-only /dev/kvm: got %+v", got)
		}
	}
}

func TestHostTSCKHz(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sys := write("tsc_freq_khz", "2593906\n")
	info := write("cpuinfo", "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\ncpu MHz\t\t: 2599.9996\n")
	bad := write("cpuinfo-bad", "cpu MHz\t\t: fast\n")
	absent := filepath.Join(dir, "absent")
	for _, tc := range []struct {
		p    tscPaths
		want int
	}{
		{tscPaths{sys, info}, 2593906},
		{tscPaths{absent, info}, 2600000},
		{tscPaths{absent, bad}, 0},
		{tscPaths{absent, absent}, 0},
	} {
		if got := hostTSCKHz(tc.p); got != tc.want {
			t.Errorf("hostTSCKHz(%+v) = %d, want %d", tc.p, got, tc.want)
		}
	}
}

// A snapshottable VM has its RAM in a shared file and QMP; a restore waits for its state (-incoming defer),
// and a private one maps the saved RAM copy-on-write.
func TestBuildArgsSnapshots(t *testing.T) {
	base := hypervisor.Config{Kernel: "/k/vmlinux", CPUs: 2, MemoryMiB: 2048, MAC: hypervisor.DefaultMAC, RAMFile: "/dev/shm/capsem-0/a,b-1.ram"}
	for _, c := range []struct {
		name     string
		restore  *hypervisor.Restore
		want     []string
		wantNone []string
		why      string
	}{
		{"saveable", nil,
			[]string{"memory-backend-file,id=ram0,size=2048M,mem-path=/dev/shm/capsem-0/a,,b-1.ram,share=on", "memory-backend=ram0", "socket,id=qmp,fd=4", "chardev=qmp,mode=control"},
			[]string{"-incoming"}, "RAM shared in a file the snapshot copies"},
		{"restored", &hypervisor.Restore{State: "/s/state", RAM: "/s/ram"},
			[]string{"mem-path=/dev/shm/capsem-0/a,,b-1.ram,share=on", "-incoming", "defer"},
			nil, "RAM copied into its own file: it can be saved again"},
		{"private", &hypervisor.Restore{State: "/s/state", RAM: "/s/ram", Private: true},
			[]string{"memory-backend-file,id=ram0,size=2048M,mem-path=/s/ram,share=off", "-incoming", "defer"},
			[]string{"share=on"}, "the saved RAM mapped copy-on-write, shared by every restore"},
	} {
		cfg := base
		cfg.Restore = c.restore
		got := strings.Join(buildArgs(&cfg, amd64, Accel{Name: "tcg"}, 0, cfgLayout(&cfg), startFacts{}), " ")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: args lack %q (%s):\n%s", c.name, w, c.why, got)
			}
		}
		for _, w := range c.wantNone {
			if strings.Contains(got, w) {
				t.Errorf("%s: args have %q (%s):\n%s", c.name, w, c.why, got)
			}
		}
	}
}

// amd64 is the x86-64 machine the tests above describe.
var amd64, _ = targetFor(arch.AMD64)
