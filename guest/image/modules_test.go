package image

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/drivers/char/hw_random/virtio-rng.ko": "virtio_rng",
		"9pnet_virtio.ko.xz":                          "9pnet_virtio",
		"crc32c-intel":                                "crc32c_intel",
		"overlay.ko.zst":                              "overlay",
	} {
		if got := ModuleName(in); got != want {
			t.Errorf("ModuleName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseModinfo(t *testing.T) {
	ko := testModule("virtio_console", []string{"virtio", "virtio_ring"}, "alias=virtio:d00000003v*", "softdep=pre: crc32c post: foo")
	mi, err := parseModinfo(ko)
	if err != nil {
		t.Fatal(err)
	}
	if mi.name != "virtio_console" || !slices.Equal(mi.depends, []string{"virtio", "virtio_ring"}) ||
		!slices.Equal(mi.softPre, []string{"crc32c"}) || !slices.Equal(mi.aliases, []string{"virtio:d00000003v*"}) {
		t.Fatalf("modinfo: %+v", mi)
	}
	if mi, err := parseModinfo(testModule("solo", nil)); err != nil || len(mi.depends) != 0 {
		t.Fatalf("no depends: %+v, %v", mi, err)
	}
	if _, err := parseModinfo([]byte("not elf")); err == nil {
		t.Fatal("garbage parsed")
	}
	if _, err := parseModinfo(testELF(1, nil, map[string][]byte{".text": {0}})); err == nil {
		t.Fatal("module without .modinfo parsed")
	}
}

func TestDecompressModule(t *testing.T) {
	ko := testModule("m", nil)
	var x bytes.Buffer
	w, _ := xz.NewWriter(&x)
	w.Write(ko)
	w.Close()
	e, _ := zstd.NewWriter(nil)
	for name, data := range map[string][]byte{
		"m.ko": ko, "m.ko.xz": x.Bytes(), "m.ko.gz": gzipBytes(ko), "m.ko.zst": e.EncodeAll(ko, nil),
	} {
		got, err := decompressModule(name, data)
		if err != nil || !bytes.Equal(got, ko) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := decompressModule("m.o", ko); err == nil {
		t.Error("non-module accepted")
	}
}

func TestLoadOrder(t *testing.T) {
	mods := map[string]modInfo{
		"virtio_ring":    {name: "virtio_ring"},
		"virtio":         {name: "virtio", depends: []string{"virtio_ring"}},
		"virtio_mmio":    {name: "virtio_mmio", depends: []string{"virtio", "virtio_ring"}},
		"virtio_console": {name: "virtio_console", depends: []string{"virtio", "virtio_ring"}},
		"erofs":          {name: "erofs", depends: []string{"libcrc32c"}},
		"libcrc32c":      {name: "libcrc32c", softPre: []string{"crc32c"}},
		"crc32c_intel":   {name: "crc32c_intel", aliases: []string{"crc32c", "crypto-crc32c"}},
		"crc32c_generic": {name: "crc32c_generic", aliases: []string{"crc32c", "crypto-crc32c"}},
		"uses_builtin":   {name: "uses_builtin", depends: []string{"ext4"}, softPre: []string{"crc32"}},
	}
	builtin := map[string]bool{"ext4": true, "crc32": true, "virtio_pci": true}
	got, err := loadOrder([]string{"virtio_mmio", "virtio-console", "erofs", "virtio_pci", "uses_builtin"}, mods, builtin)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"virtio_ring", "virtio", "virtio_mmio", "virtio_console", "crc32c_generic", "libcrc32c", "erofs", "uses_builtin"}
	if !slices.Equal(got, want) {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}

	for name, tc := range map[string]struct {
		want []string
		mods map[string]modInfo
		err  string
	}{
		"missing":     {[]string{"nope"}, mods, "nope is not in the kernel package"},
		"missing dep": {[]string{"a"}, map[string]modInfo{"a": {name: "a", depends: []string{"b"}}}, "b (needed by a)"},
		"cycle":       {[]string{"a"}, map[string]modInfo{"a": {name: "a", depends: []string{"b"}}, "b": {name: "b", depends: []string{"a"}}}, "cycle"},
		"softdep":     {[]string{"a"}, map[string]modInfo{"a": {name: "a", softPre: []string{"zz"}}}, "no module provides it"},
	} {
		_, err := loadOrder(tc.want, tc.mods, nil)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", name, err, tc.err)
		}
	}
}
