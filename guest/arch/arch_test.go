package arch

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Arch
		why  string
	}{
		{"amd64", AMD64, "Go and Debian's name"},
		{"x86_64", AMD64, "uname's name"},
		{"arm64", ARM64, "Go and Debian's name"},
		{"AArch64", ARM64, "uname's name, any case"},
		{"", Host(), "no flag is the host's"},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q (%s)", tc.in, got, err, tc.want, tc.why)
		}
	}
	for _, bad := range []string{"riscv64", "arm", "i386", "amd"} {
		if a, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %q, want an error naming the architectures capsem has", bad, a)
		}
	}
}

func TestRecorded(t *testing.T) {
	for _, tc := range []struct {
		in, want Arch
		why      string
	}{
		{"", AMD64, "a file written before arm64 existed names none, and was amd64's"},
		{AMD64, AMD64, "as written"},
		{ARM64, ARM64, "as written"},
	} {
		if got := Recorded(tc.in); got != tc.want {
			t.Errorf("Recorded(%q) = %q, want %q (%s)", tc.in, got, tc.want, tc.why)
		}
	}
}

func TestNames(t *testing.T) {
	if ARM64.QEMUSystem() != "qemu-system-aarch64" || AMD64.QEMUSystem() != "qemu-system-x86_64" {
		t.Errorf("QEMU binaries: %s, %s", AMD64.QEMUSystem(), ARM64.QEMUSystem())
	}
	if ARM64.Uname() != "aarch64" || AMD64.Uname() != "x86_64" {
		t.Errorf("uname: %s, %s", AMD64.Uname(), ARM64.Uname())
	}
}

func TestOfKernel(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	img := make([]byte, 64)
	binary.LittleEndian.PutUint32(img[0x38:], arm64ImageMagic)
	elfHdr := make([]byte, 64)
	copy(elfHdr, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(elfHdr[18:], 62) // EM_X86_64
	elfARM := append([]byte(nil), elfHdr...)
	binary.LittleEndian.PutUint16(elfARM[18:], 183) // EM_AARCH64: not a kernel capsem boots
	for _, tc := range []struct {
		name string
		b    []byte
		want Arch
		why  string
	}{
		{"Image", img, ARM64, "the arm64 Image header's magic at 0x38"},
		{"vmlinux", elfHdr, AMD64, "an x86-64 ELF is the PVH vmlinux"},
		{"vmlinux-arm", elfARM, "", "an arm64 ELF vmlinux is not what vz or -M virt load here"},
		{"gz", []byte{0x1f, 0x8b, 8, 0}, "", "a compressed kernel has no readable header"},
		{"empty", nil, "", "an empty file"},
	} {
		got, err := OfKernel(write(tc.name, tc.b))
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrUnknownKernel) {
			t.Errorf("%s: OfKernel = %q, %v; want %q (%s)", tc.name, got, err, tc.want, tc.why)
		}
	}
}
