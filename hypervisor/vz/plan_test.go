package vz

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

// The plan is what the VM would contain; these tests need no Mac. The
// framework's side (vz_darwin.go) is a translation of it, type-checked on
// Linux by tools/darwintypecheck and run only on a Mac.

// user is a uid that is not root, for planFor.
const user = 501

// sandboxFiles are the files a sandbox gives the backend, made under a
// temporary directory: the arm64 guest guest/image builds (Image,
// initramfs, erofs root), the sandbox's data and transfer disks, and its
// workspace.
type sandboxFiles struct {
	kernel, initrd, root, data, transfer, workspace, console string
	nic                                                      *os.File
}

// arm64Image is the start of an uncompressed arm64 Image: an EFI-stub
// Image still starts with MZ, and has the ARM\x64 magic at 0x38
// (Documentation/arch/arm64/booting.rst).
func arm64Image() []byte {
	h := make([]byte, 128)
	copy(h, "MZ")
	copy(h[0x38:], "ARM\x64")
	return h
}

func newSandboxFiles(t *testing.T) sandboxFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// The plan only carries the NIC's file; what a sandbox gives is the
	// VM's end of DatagramPair.
	nic, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nic.Close() })
	return sandboxFiles{
		kernel:    write("Image", arm64Image()),
		initrd:    write("initramfs.cpio.gz", []byte("cpio")),
		root:      write("rootfs.erofs", []byte("erofs")),
		data:      write("data.ext4", []byte("ext4")),
		transfer:  write("transfer", nil),
		workspace: ws,
		console:   filepath.Join(dir, "console.log"),
		nic:       nic,
	}
}

// config is the hypervisor.Config sandbox.Start makes for these files
// (its GuestBoot, without the CA, and debugfs=off).
func (f sandboxFiles) config() hypervisor.Config {
	return hypervisor.Config{
		Kernel:       f.kernel,
		Initramfs:    f.initrd,
		RootImage:    f.root,
		DataDisk:     f.data,
		TransferDisk: f.transfer,
		Workspace:    f.workspace,
		NIC:          f.nic,
		CPUs:         2,
		MemoryMiB:    1024,
		ConsoleLog:   f.console,
		Cmdline:      []string{"debugfs=off"},
		Boot: bootparam.BootParams{
			IP:      netip.MustParsePrefix("198.18.0.2/24"),
			Gateway: netip.MustParseAddr("198.18.0.1"),
			DNS:     []netip.Addr{netip.MustParseAddr("198.18.0.1")},
			MTU:     1500,
		},
	}
}

// planOn plans cfg as New does, on a Mac of architecture host run by
// euid.
func planOn(t *testing.T, cfg hypervisor.Config, opts Options, host arch.Arch, euid int) (Plan, error) {
	t.Helper()
	opts.Logger = quiet()
	v, err := newVM(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return planFor(&v.cfg, &v.opts, host, euid)
}

// TestPlanSandbox is the whole VM a sandbox gets on Apple silicon.
func TestPlanSandbox(t *testing.T) {
	f := newSandboxFiles(t)
	got, err := planOn(t, f.config(), Options{}, arch.ARM64, user)
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{
		Boot: BootLoader{
			Kernel: f.kernel,
			Initrd: f.initrd,
			Cmdline: "console=ttyS0 panic=-1 quiet loglevel=1 mitigations=off no_timer_check audit=0 8250.nr_uarts=1 random.trust_cpu=on" +
				" console=hvc0 debugfs=off" +
				" capsem.root=/dev/vda capsem.rw=/dev/vdb capsem.ip=198.18.0.2/24 capsem.gw=198.18.0.1 capsem.dns=198.18.0.1 capsem.mtu=1500" +
				" capsem.ws=virtiofs capsem.vsock=1024",
		},
		CPUs:        2,
		MemoryBytes: 1 << 30,
		Console:     Console{Log: f.console},
		Entropy:     true,
		Disks: []Disk{
			{Name: "root", Path: f.root, ReadOnly: true, Device: "/dev/vda"},
			{Name: "data", Path: f.data, Device: "/dev/vdb"},
			{Name: "transfer", Path: f.transfer, Device: "/dev/vdc"},
		},
		NIC:       &NIC{File: f.nic, MAC: hypervisor.DefaultMAC},
		Workspace: &Share{Dir: f.workspace, Tag: "workspace", ReadOnly: false, ClearSetID: true},
		VsockPort: DefaultControlPort,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan:\n got %+v\nwant %+v", got, want)
		if got.Boot.Cmdline != want.Boot.Cmdline {
			t.Errorf("cmdline:\n got %s\nwant %s", got.Boot.Cmdline, want.Boot.Cmdline)
		}
		if !reflect.DeepEqual(got.NIC, want.NIC) {
			t.Errorf("NIC: got %+v, want %+v", got.NIC, want.NIC)
		}
		if !reflect.DeepEqual(got.Workspace, want.Workspace) {
			t.Errorf("workspace: got %+v, want %+v", got.Workspace, want.Workspace)
		}
	}
	if m, w := machineName(&got, "14.5", "arm64"), "vz 14.5 arm64 cpus=2 mem=1024M devices=console,rng,root,data,transfer,net,virtiofs,vsock"; m != w {
		t.Errorf("machineName:\n got %s\nwant %s", m, w)
	}
}

func TestPlanDisks(t *testing.T) {
	f := newSandboxFiles(t)
	type disk struct {
		name, device string
		readOnly     bool
	}
	root := disk{"root", hypervisor.RootDevice, true}
	data := disk{"data", hypervisor.DataDevice, false}
	transfer := disk{"transfer", hypervisor.TransferDevice, false}
	for _, tc := range []struct {
		name   string
		change func(*hypervisor.Config)
		want   []disk
		why    string
	}{
		{"sandbox", func(*hypervisor.Config) {}, []disk{root, data, transfer},
			"root, data, transfer: the order the guest names them /dev/vda, vdb, vdc in"},
		{"no transfer", func(c *hypervisor.Config) { c.TransferDisk = "" }, []disk{root, data},
			"a capsem run has no transfer disk"},
		{"root only", func(c *hypervisor.Config) { c.TransferDisk, c.DataDisk = "", "" }, []disk{root},
			"the root image alone: the writable layer is a tmpfs"},
		{"none", func(c *hypervisor.Config) { c.TransferDisk, c.DataDisk, c.RootImage = "", "", "" }, nil,
			"the initramfs alone"},
	} {
		cfg := f.config()
		tc.change(&cfg)
		p, err := planOn(t, cfg, Options{}, arch.ARM64, user)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []disk
		for _, d := range p.Disks {
			got = append(got, disk{d.Name, d.Device, d.ReadOnly})
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: disks %v, want %v (%s)", tc.name, got, tc.want, tc.why)
		}
	}
}

func TestPlanCmdline(t *testing.T) {
	f := newSandboxFiles(t)
	for _, tc := range []struct {
		name     string
		change   func(*hypervisor.Config, *Options)
		has, not []string
		why      string
	}{
		{"console", func(*hypervisor.Config, *Options) {}, []string{"console=hvc0"}, nil,
			"the virtio console is the only console under vz"},
		{"vsock port", func(*hypervisor.Config, *Options) {}, []string{"capsem.vsock=1024"}, []string{"capsem.port="},
			"the agent listens on vsock, not a virtio-serial port"},
		{"other port", func(_ *hypervisor.Config, o *Options) { o.ControlPort = 5000 }, []string{"capsem.vsock=5000"}, nil,
			"the port the host dials is the one the guest is told"},
		{"root", func(*hypervisor.Config, *Options) {}, []string{"capsem.root=/dev/vda"}, []string{"root=/dev/vda ro"},
			"the initramfs's /init mounts the root image, not the kernel"},
		{"data", func(*hypervisor.Config, *Options) {}, []string{"capsem.rw=/dev/vdb"}, nil,
			"the data disk is the root's writable layer"},
		{"workspace", func(*hypervisor.Config, *Options) {}, []string{"capsem.ws=virtiofs"}, []string{"capsem.ws.tag="},
			"virtio-fs under the default tag, the share's"},
		{"foreign ws", func(c *hypervisor.Config, _ *Options) { c.Boot.WSFS, c.Boot.WSTag = "9p", "elsewhere" },
			[]string{"capsem.ws=virtiofs"}, []string{"capsem.ws=9p", "capsem.ws.tag="},
			"what the caller set for qemu gives way to the share vz makes"},
		{"no workspace", func(c *hypervisor.Config, _ *Options) { c.Workspace = "" }, nil, []string{"capsem.ws="},
			"nothing to mount"},
		{"no initramfs", func(c *hypervisor.Config, _ *Options) {
			c.Initramfs, c.DataDisk, c.TransferDisk = "", "", ""
		}, []string{"root=/dev/vda ro"}, []string{"capsem.root="},
			"without an initramfs the kernel mounts the root itself"},
		{"arm64", func(*hypervisor.Config, *Options) {}, nil, []string{"tsc_early_khz"},
			"x86 TCG's calibration has no place on arm64 hardware virtualisation"},
	} {
		cfg, opts := f.config(), Options{}
		tc.change(&cfg, &opts)
		p, err := planOn(t, cfg, opts, arch.ARM64, user)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		words := " " + p.Boot.Cmdline + " "
		for _, w := range tc.has {
			if !strings.Contains(words, " "+w+" ") {
				t.Errorf("%s: cmdline lacks %q (%s): %s", tc.name, w, tc.why, p.Boot.Cmdline)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(words, " "+w) {
				t.Errorf("%s: cmdline has %q (%s): %s", tc.name, w, tc.why, p.Boot.Cmdline)
			}
		}
		if p.VsockPort != opts.ControlPort && !(opts.ControlPort == 0 && p.VsockPort == DefaultControlPort) {
			t.Errorf("%s: vsock port %d, the guest is told another", tc.name, p.VsockPort)
		}
	}
}

func TestPlanWorkspace(t *testing.T) {
	f := newSandboxFiles(t)
	for _, tc := range []struct {
		name   string
		change func(*hypervisor.Config)
		want   *Share
		why    string
	}{
		{"writable", func(*hypervisor.Config) {}, &Share{Dir: f.workspace, Tag: bootparam.WorkspaceTag, ClearSetID: true},
			"the guest may set setuid bits: cleared when the VM stops"},
		{"read-only", func(c *hypervisor.Config) { c.WorkspaceReadOnly = true }, &Share{Dir: f.workspace, Tag: bootparam.WorkspaceTag, ReadOnly: true},
			"exported read-only to the framework; the guest cannot write, so nothing to clear"},
		{"none", func(c *hypervisor.Config) { c.Workspace = "" }, nil,
			"no virtio-fs device at all"},
	} {
		cfg := f.config()
		tc.change(&cfg)
		p, err := planOn(t, cfg, Options{}, arch.ARM64, user)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(p.Workspace, tc.want) {
			t.Errorf("%s: share %+v, want %+v (%s)", tc.name, p.Workspace, tc.want, tc.why)
		}
	}
}

func TestPlanNIC(t *testing.T) {
	f := newSandboxFiles(t)
	for _, tc := range []struct {
		name   string
		change func(*hypervisor.Config, *Options)
		want   *NIC
		why    string
	}{
		{"default", func(*hypervisor.Config, *Options) {}, &NIC{File: f.nic, MAC: hypervisor.DefaultMAC},
			"the framework's default MTU, 1500, the sandbox's"},
		{"mac", func(c *hypervisor.Config, _ *Options) { c.MAC = "02:00:00:00:00:09" }, &NIC{File: f.nic, MAC: "02:00:00:00:00:09"},
			"Config.MAC is the guest's"},
		{"1500", func(_ *hypervisor.Config, o *Options) { o.MTU = 1500 }, &NIC{File: f.nic, MAC: hypervisor.DefaultMAC},
			"1500 is the default: not set, so the machine name does not change"},
		{"jumbo", func(c *hypervisor.Config, o *Options) { o.MTU, c.Boot.MTU = 9000, 9000 }, &NIC{File: f.nic, MAC: hypervisor.DefaultMAC, MTU: 9000},
			"a larger MTU is set on the attachment"},
		{"none", func(c *hypervisor.Config, _ *Options) { c.NIC = nil }, nil,
			"no NIC: no network device at all"},
	} {
		cfg, opts := f.config(), Options{}
		tc.change(&cfg, &opts)
		p, err := planOn(t, cfg, opts, arch.ARM64, user)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(p.NIC, tc.want) {
			t.Errorf("%s: NIC %+v, want %+v (%s)", tc.name, p.NIC, tc.want, tc.why)
		}
	}
}

func TestPlanRefuses(t *testing.T) {
	f := newSandboxFiles(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	zboot := make([]byte, 128)
	copy(zboot, "MZ\x00\x00zimg")
	elf := append([]byte("\x7fELF"), make([]byte, 100)...)
	gz := append([]byte{0x1f, 0x8b, 8}, make([]byte, 100)...)
	bare := make([]byte, 128)
	copy(bare[0x38:], "ARM\x64") // the magic alone, no MZ
	kernel := func(p string) func(*hypervisor.Config, *Options) {
		return func(c *hypervisor.Config, _ *Options) { c.Kernel = p }
	}
	same := func(*hypervisor.Config, *Options) {}

	for _, tc := range []struct {
		name   string
		change func(*hypervisor.Config, *Options)
		host   arch.Arch
		euid   int
		want   string // "" for none
		why    string
	}{
		{"image", same, arch.ARM64, user, "",
			"the uncompressed arm64 Image guest/image builds"},
		{"bare image", kernel(write("Image.bare", bare)), arch.ARM64, user, "",
			"the magic is what makes an Image, with or without the EFI stub"},
		{"gzip", kernel(write("Image.gz", gz)), arch.ARM64, user, "gzip-compressed (Image.gz or vmlinuz): the Virtualization framework boots only the uncompressed arm64 Image (arch/arm64/boot/Image; capsem image build --arch arm64 makes one); gunzip it",
			"the framework does not decompress, and fails later without a reason"},
		{"zboot", kernel(write("vmlinuz.efi", zboot)), arch.ARM64, user, "EFI zboot image (compressed vmlinuz): the Virtualization framework boots only the uncompressed arm64 Image",
			"a zboot vmlinuz is compressed too; its payload is the Image"},
		{"elf", kernel(write("vmlinux", elf)), arch.ARM64, user, "ELF vmlinux (the qemu backend's x86 PVH kernel): the Virtualization framework boots only the uncompressed arm64 Image (arch/arm64/boot/Image; capsem image build --arch arm64 makes one)",
			"the amd64 guest's kernel does not boot on Apple silicon"},
		{"junk", kernel(write("junk", make([]byte, 128))), arch.ARM64, user, "not an arm64 Image (no ARM\\x64 magic at offset 0x38)",
			"anything else is named for what it is not"},
		{"short", kernel(write("short", []byte("MZ"))), arch.ARM64, user, "too short to be an arm64 Image: build the arm64 guest",
			"a truncated download"},
		{"arm64 on intel", same, arch.AMD64, user, "is an arm64 Image and this Mac is Intel (amd64)",
			"the framework runs guests of the host's architecture only"},
		{"elf on intel", kernel(write("vmlinux.amd64", elf)), arch.AMD64, user, "",
			"on an Intel Mac only an arm64 Image is known not to boot"},
		{"root", same, arch.ARM64, 0, "refusing to run a guest as root: run capsem as the user who owns the workspace",
			"the virtio-fs server writes with this process's identity: as root, root-owned and device files could land in the workspace"},
		{"mac", func(c *hypervisor.Config, _ *Options) { c.MAC = "not-a-mac" }, arch.ARM64, user, `NIC MAC "not-a-mac"`,
			"caught before the framework is touched"},
		{"mtu", func(c *hypervisor.Config, _ *Options) { c.Boot.MTU = 9000 }, arch.ARM64, user, "told MTU 9000 (capsem.mtu) but its NIC carries 1500: set Options.MTU to 9000",
			"a guest that sends frames larger than its NIC carries loses them"},
	} {
		cfg, opts := f.config(), Options{}
		tc.change(&cfg, &opts)
		_, err := planOn(t, cfg, opts, tc.host, tc.euid)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v (%s)", tc.name, err, tc.why)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q (%s)", tc.name, err, tc.want, tc.why)
		case err != nil && !strings.HasPrefix(err.Error(), "vz: "):
			t.Errorf("%s: %v: not prefixed with the package", tc.name, err)
		}
	}
}
