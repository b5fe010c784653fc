package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

const testRelease = "6.1.0-99-amd64"

// testKernelDeb is a fake linux-image package: a bzImage around a PVH
// ELF, a config, modules.builtin and a few modules (one xz-compressed).
func testKernelDeb(t *testing.T, dataName string) []byte {
	t.Helper()
	mod := func(name string, deps ...string) []byte { return testModule(name, deps) }
	var xzMod bytes.Buffer
	w, _ := xz.NewWriter(&xzMod)
	w.Write(mod("virtio_console", "virtio", "virtio_ring"))
	w.Close()
	elfb := testVmlinux(0x1000850)
	m := "./lib/modules/" + testRelease + "/"
	files := []tarFile{
		{"./boot/config-" + testRelease, []byte("CONFIG_PVH=y\n")},
		{"./boot/vmlinuz-" + testRelease, testBzImage(gzipBytes(elfb))},
		{m + "kernel/drivers/char/virtio_console.ko.xz", xzMod.Bytes()},
		{m + "kernel/drivers/virtio/virtio.ko", mod("virtio", "virtio_ring")},
		{m + "kernel/drivers/virtio/virtio_mmio.ko", mod("virtio_mmio", "virtio", "virtio_ring")},
		{m + "kernel/drivers/virtio/virtio_ring.ko", mod("virtio_ring")},
		{m + "kernel/sound/unrelated.ko", mod("unrelated")},
		{m + "modules.builtin", []byte("kernel/fs/ext4/ext4.ko\n")},
		{"./usr/share/doc/linux-image/changelog.gz", []byte("x")},
	}
	data := testTar(t, files)
	switch dataName {
	case "data.tar.xz":
		var b bytes.Buffer
		w, _ := xz.NewWriter(&b)
		w.Write(data)
		w.Close()
		data = b.Bytes()
	case "data.tar.gz":
		data = gzipBytes(data)
	case "data.tar.zst":
		e, _ := zstd.NewWriter(nil)
		data = e.EncodeAll(data, nil)
	}
	return testDeb(t, dataName, data)
}

func TestWalkDeb(t *testing.T) {
	for _, name := range []string{"data.tar.xz", "data.tar.gz", "data.tar.zst", "data.tar"} {
		p := filepath.Join(t.TempDir(), "k.deb")
		os.WriteFile(p, testKernelDeb(t, name), 0o644)
		var names []string
		err := walkDeb(p, func(h *tar.Header, r io.Reader) error {
			names = append(names, h.Name)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(names) != 9 || names[1] != "boot/vmlinuz-"+testRelease {
			t.Fatalf("%s: entries %v", name, names)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.deb")
	os.WriteFile(bad, []byte("!<arch>\n"), 0o644)
	if err := walkDeb(bad, func(*tar.Header, io.Reader) error { return nil }); err == nil || !strings.Contains(err.Error(), "no data.tar") {
		t.Fatalf("empty ar: %v", err)
	}
	os.WriteFile(bad, []byte("PK\x03\x04 zip"), 0o644)
	if err := walkDeb(bad, func(*tar.Header, io.Reader) error { return nil }); err == nil {
		t.Fatal("zip accepted as a .deb")
	}
}

func TestPrepareKernelFromDeb(t *testing.T) {
	deb := filepath.Join(t.TempDir(), "k.deb")
	os.WriteFile(deb, testKernelDeb(t, "data.tar.xz"), 0o644)
	sum, _ := fileSHA256(deb)
	pkg := KernelPackage{Package: "linux-image-" + testRelease, Version: "6.1.999-1", SHA256: sum, Release: testRelease}
	c := &Cache{Root: t.TempDir()}
	want := []string{"virtio_mmio", "virtio_console", "ext4"}
	k, err := c.PrepareKernel(context.Background(), KernelOptions{Package: pkg, Modules: want, Deb: deb})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.Modules, []string{"virtio_ring", "virtio", "virtio_mmio", "virtio_console"}) {
		t.Fatalf("modules %v", k.Modules)
	}
	if k.Compression != CompressionGzip || k.PVHEntry != 0x1000850 || k.DebSHA256 != sum || k.Release != testRelease {
		t.Fatalf("kernel %+v", k)
	}
	if b, _ := os.ReadFile(k.Boot()); !bytes.Equal(b, testVmlinux(0x1000850)) {
		t.Fatal("vmlinux differs")
	}
	if b, _ := os.ReadFile(k.ModulePath("virtio_console")); !bytes.Equal(b, testModule("virtio_console", []string{"virtio", "virtio_ring"})) {
		t.Fatal("virtio_console.ko not decompressed")
	}
	ents, _ := os.ReadDir(filepath.Join(k.Dir, "modules"))
	if len(ents) != 4 {
		t.Fatalf("%d module files, want 4 (no unrelated ones, no staging left)", len(ents))
	}
	if _, err := os.Stat(filepath.Join(k.Dir, ".stage")); !os.IsNotExist(err) {
		t.Fatal("staging directory left in the cache")
	}

	// Cached: found by the pinned checksum, without the .deb or apt-get.
	os.Remove(deb)
	t.Setenv("PATH", t.TempDir())
	k2, err := c.PrepareKernel(context.Background(), KernelOptions{Package: pkg, Modules: want})
	if err != nil || k2.Dir != k.Dir {
		t.Fatalf("cached kernel: %+v, %v", k2, err)
	}
	// Other modules, other key.
	if _, err := c.PrepareKernel(context.Background(), KernelOptions{Package: pkg, Modules: []string{"virtio"}}); err == nil {
		t.Fatal("a different module set reused the cache (or fetched without apt-get)")
	}

	// The initramfs from it is cached and reproducible.
	init := filepath.Join(t.TempDir(), "init")
	os.WriteFile(init, []byte("\x7fELF fake init"), 0o755)
	p1, err := c.Initramfs(k, init, None)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	recs := readNewc(t, b1)
	var names []string
	for _, r := range recs {
		names = append(names, r.name)
		if r.name == "lib/modules/capsem.order" && string(r.data) != "virtio_ring.ko\nvirtio.ko\nvirtio_mmio.ko\nvirtio_console.ko\n" {
			t.Errorf("capsem.order: %q", r.data)
		}
	}
	for _, n := range []string{"init", "dev/console", "proc", "sys", "tmp", "lib/modules/virtio_mmio.ko", "lib/modules/capsem.order"} {
		if !slices.Contains(names, n) {
			t.Errorf("initramfs lacks %s: %v", n, names)
		}
	}
	os.RemoveAll(filepath.Dir(p1))
	p2, err := c.Initramfs(k, init, None)
	if err != nil || p2 != p1 {
		t.Fatalf("rebuilt at %s, %v", p2, err)
	}
	if b2, _ := os.ReadFile(p2); !bytes.Equal(b1, b2) {
		t.Fatal("initramfs rebuilt from the same inputs differs")
	}
	pgz, err := c.Initramfs(k, init, Gzip)
	if err != nil || pgz == p1 || !strings.HasSuffix(pgz, ".cpio.gz") {
		t.Fatalf("gzip initramfs: %s, %v", pgz, err)
	}
}

func TestPrepareKernelChecksum(t *testing.T) {
	deb := filepath.Join(t.TempDir(), "k.deb")
	os.WriteFile(deb, testKernelDeb(t, "data.tar.gz"), 0o644)
	c := &Cache{Root: t.TempDir()}
	pkg := KernelPackage{Package: "p", Version: "1", SHA256: strings.Repeat("0", 64), Release: testRelease}
	_, err := c.PrepareKernel(context.Background(), KernelOptions{Package: pkg, Deb: deb})
	if err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("wrong checksum: %v", err)
	}
	pkg.SHA256 = ""
	pkg.Release = "7.0.0-1-amd64"
	_, err = c.PrepareKernel(context.Background(), KernelOptions{Package: pkg, Deb: deb})
	if err == nil || !strings.Contains(err.Error(), "Release") {
		t.Fatalf("wrong release: %v", err)
	}
}

// fakeAptGet puts an apt-get on PATH that "downloads" body as the
// package's .deb into the current directory.
func fakeAptGet(t *testing.T, k KernelPackage, body []byte, fail bool) {
	t.Helper()
	bin := t.TempDir()
	src := filepath.Join(bin, "payload")
	os.WriteFile(src, body, 0o644)
	script := "#!/bin/sh\n[ \"$1\" = download ] || exit 2\n"
	if fail {
		script += "echo \"E: Version '" + k.Version + "' for '" + k.Package + "' was not found\" >&2; exit 100\n"
	} else {
		script += "cp " + src + " ./" + k.DebFile() + "\n"
	}
	os.WriteFile(filepath.Join(bin, "apt-get"), []byte(script), 0o755)
	t.Setenv("PATH", bin+":/usr/bin:/bin")
}

func TestFetchKernelDeb(t *testing.T) {
	body := []byte("a .deb")
	wrongSum := strings.Repeat("ab", 32)
	real, _ := func() (string, error) {
		p := filepath.Join(t.TempDir(), "b")
		os.WriteFile(p, body, 0o644)
		return fileSHA256(p)
	}()
	k := KernelPackage{Package: "linux-image-x", Version: "1:2.3-4", SHA256: real, Release: "x"}
	if k.DebFile() != "linux-image-x_1%3a2.3-4_amd64.deb" {
		t.Fatalf("DebFile = %s", k.DebFile())
	}
	c := &Cache{Root: t.TempDir()}

	fakeAptGet(t, k, body, true)
	_, err := c.FetchKernelDeb(context.Background(), k)
	if err == nil || !strings.Contains(err.Error(), "was not found") || !strings.Contains(err.Error(), "apt-get update") {
		t.Fatalf("missing version: %v", err)
	}

	bad := k
	bad.SHA256 = wrongSum
	fakeAptGet(t, bad, body, false)
	if _, err := c.FetchKernelDeb(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("wrong checksum: %v", err)
	}

	fakeAptGet(t, k, body, false)
	p, err := c.FetchKernelDeb(context.Background(), k)
	if err != nil || p != filepath.Join(c.Downloads(), k.DebFile()) {
		t.Fatalf("fetch: %s, %v", p, err)
	}
	// Cached: no apt-get needed.
	t.Setenv("PATH", t.TempDir())
	if p2, err := c.FetchKernelDeb(context.Background(), k); err != nil || p2 != p {
		t.Fatalf("cached fetch: %s, %v", p2, err)
	}
	ents, _ := os.ReadDir(c.Downloads())
	if len(ents) != 1 {
		t.Fatalf("downloads hold %d entries, want 1 (temporary directory left?)", len(ents))
	}
	other := k
	other.Version = "9"
	if _, err := c.FetchKernelDeb(context.Background(), other); err == nil || !strings.Contains(err.Error(), "apt-get not found") {
		t.Fatalf("no apt-get: %v", err)
	}
}
