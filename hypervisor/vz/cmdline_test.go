package vz

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

func TestKernelCmdline(t *testing.T) {
	cfg := &hypervisor.Config{
		Kernel:    "/k/Image",
		Initramfs: "/k/initrd",
		RootImage: "/img/root.erofs",
		Workspace: "/home/u/proj",
		// capsem.ws=9p as a caller might set it for qemu: vz writes its own.
		Boot: bootparam.BootParams{IP: netip.MustParsePrefix("198.18.0.2/24"), WSFS: "9p"},
	}
	got := kernelCmdline(cfg, 1024)
	want := "console=ttyS0 panic=-1 quiet loglevel=1 mitigations=off no_timer_check audit=0 8250.nr_uarts=1 random.trust_cpu=on" +
		" console=hvc0 capsem.root=/dev/vda capsem.ip=198.18.0.2/24 capsem.ws=virtiofs capsem.vsock=1024"
	if got != want {
		t.Fatalf("cmdline:\n got %s\nwant %s", got, want)
	}

	short := kernelCmdline(&hypervisor.Config{Kernel: "/k", RootImage: "/r"}, 7)
	if !strings.HasSuffix(short, " console=hvc0 root=/dev/vda ro capsem.vsock=7") {
		t.Fatalf("no initramfs, no workspace: %s", short)
	}
	if strings.Contains(short, "capsem.ws") || strings.Contains(short, "tsc_early_khz") {
		t.Fatalf("minimal cmdline: %s", short)
	}
}

func TestCheckKernel(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	image := make([]byte, 128)
	copy(image, "MZ") // an EFI-stub Image still starts with MZ
	binary.LittleEndian.PutUint32(image[0x38:], arm64ImageMagic)
	zboot := make([]byte, 128)
	copy(zboot, "MZ\x00\x00zimg")
	elf := append([]byte("\x7fELF"), make([]byte, 100)...)
	gz := append([]byte{0x1f, 0x8b, 8}, make([]byte, 100)...)

	for _, tc := range []struct {
		path, arch, want string
	}{
		{write("Image", image), "arm64", ""},
		{write("zboot", zboot), "arm64", "EFI zboot"},
		{write("vmlinux", elf), "arm64", "ELF vmlinux"},
		{write("Image.gz", gz), "arm64", "gzip"},
		{write("junk", make([]byte, 128)), "arm64", "not an arm64 Image"},
		{write("short", []byte("MZ")), "arm64", "too short"},
		{filepath.Join(dir, "absent"), "arm64", "no such file"},
		{write("bzImage", elf), "amd64", ""},
	} {
		err := checkKernel(tc.path, tc.arch)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s/%s: %v", filepath.Base(tc.path), tc.arch, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s/%s: %v, want %q", filepath.Base(tc.path), tc.arch, err, tc.want)
		}
	}
}
