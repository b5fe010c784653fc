package arch

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// Arch is a guest architecture, by its Go and Debian name ("amd64",
// "arm64"). The zero value is not an architecture: Host or Parse give one.
type Arch string

// The architectures capsem builds guests for.
const (
	AMD64 Arch = "amd64"
	ARM64 Arch = "arm64"
)

// All lists them, amd64 first.
var All = []Arch{AMD64, ARM64}

// Host is the architecture capsem runs on, when it is one of All; else "".
func Host() Arch {
	a := Arch(runtime.GOARCH)
	if a.Valid() {
		return a
	}
	return ""
}

// Recorded reads an architecture capsem wrote into a file it keeps (a
// manifest, a recipe, a sandbox's settings): "" is amd64, since a file
// written before arm64 existed says none.
func Recorded(a Arch) Arch {
	if a == "" {
		return AMD64
	}
	return a
}

// Valid reports whether a is one of All.
func (a Arch) Valid() bool { return a == AMD64 || a == ARM64 }

// Parse reads an architecture by any of its names: the Go/Debian one
// (amd64, arm64) or uname's (x86_64, aarch64). "" is the host's.
func Parse(s string) (Arch, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		if h := Host(); h != "" {
			return h, nil
		}
		return "", fmt.Errorf("arch: capsem runs on %s, which is not a guest architecture: give --arch amd64 or arm64", runtime.GOARCH)
	case "amd64", "x86_64", "x86-64":
		return AMD64, nil
	case "arm64", "aarch64":
		return ARM64, nil
	}
	return "", fmt.Errorf("arch: unknown architecture %q: want amd64 (x86_64) or arm64 (aarch64)", s)
}

// String is the Go/Debian name.
func (a Arch) String() string { return string(a) }

// Uname is what `uname -m` prints in a guest of this architecture.
func (a Arch) Uname() string {
	switch a {
	case AMD64:
		return "x86_64"
	case ARM64:
		return "aarch64"
	}
	return ""
}

// QEMUSystem is the QEMU system emulator that boots it.
func (a Arch) QEMUSystem() string { return "qemu-system-" + a.Uname() }

// QEMUSystemPackage is the Debian package that has QEMUSystem.
func (a Arch) QEMUSystemPackage() string {
	if a == ARM64 {
		return "qemu-system-arm"
	}
	return "qemu-system-x86"
}

// Machine is the ELF machine of a program built for it.
func (a Arch) Machine() elf.Machine {
	switch a {
	case AMD64:
		return elf.EM_X86_64
	case ARM64:
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// Foreign reports whether programs built for a need an emulator to run on
// this host (qemu-user through binfmt_misc, for the image build).
func (a Arch) Foreign() bool { return a != Host() }

// arm64ImageMagic is the arm64 Image header's magic ("ARM\x64",
// little-endian) at offset 0x38 (Documentation/arch/arm64/booting.rst).
const arm64ImageMagic = 0x644d5241

// IsARM64Image reports whether h, a file's first 64 bytes or more, is the
// header of an uncompressed arm64 kernel Image.
func IsARM64Image(h []byte) bool {
	return len(h) >= 0x3c && binary.LittleEndian.Uint32(h[0x38:]) == arm64ImageMagic
}

// ErrUnknownKernel is OfKernel's error for a file that is neither kernel
// format capsem boots.
var ErrUnknownKernel = errors.New("arch: not a kernel capsem boots (an x86-64 ELF vmlinux or an arm64 Image)")

// OfKernel is the architecture of the kernel file at path, read from its
// header: an x86-64 ELF (the PVH vmlinux) is amd64, an arm64 Image is
// arm64.
func OfKernel(path string) (Arch, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("arch: kernel: %w", err)
	}
	defer f.Close()
	h := make([]byte, 64)
	n, err := io.ReadFull(f, h)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("arch: kernel: %w", err)
	}
	h = h[:n]
	switch {
	case IsARM64Image(h):
		return ARM64, nil
	case bytes.HasPrefix(h, []byte(elf.ELFMAG)) && len(h) >= 20 && h[elf.EI_CLASS] == byte(elf.ELFCLASS64) &&
		elf.Machine(binary.LittleEndian.Uint16(h[18:])) == elf.EM_X86_64:
		return AMD64, nil
	}
	return "", fmt.Errorf("%w: %s", ErrUnknownKernel, path)
}
