package vz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/capsem/capsem/hypervisor"
)

// kernelCmdline is the guest kernel's command line (see the package
// documentation for the order and why).
func kernelCmdline(cfg *hypervisor.Config, port uint32) string {
	// No tsc_early_khz: that is for x86 TCG; vz runs on hardware
	// virtualisation. console=ttyS0 from the base stays harmless (there is
	// no 8250 under vz); the last console= is /dev/console.
	w := hypervisor.BaseCmdline(0)
	w = append(w, "console=hvc0")
	p := cfg.Boot
	w = append(w, hypervisor.DiskBoot(cfg, &p)...)
	w = append(w, cfg.Cmdline...)
	// The control channel on vsock instead of the virtio-serial port, and
	// the workspace over virtio-fs.
	p.Vsock = port
	if cfg.Workspace != "" {
		p.WSFS = "virtiofs"
	}
	w = append(w, p.String())
	return strings.Join(w, " ")
}

// arm64ImageMagic is the arm64 Image header's magic ("ARM\x64",
// little-endian) at offset 0x38 (Documentation/arch/arm64/booting.rst).
const arm64ImageMagic = 0x644d5241

// checkKernel reports a kernel the framework's Linux boot loader will not
// start, with what to use instead. Only arm64 is checked: there the
// framework fails late and without a reason on a compressed kernel.
func checkKernel(path, goarch string) error {
	if goarch != "arm64" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("vz: kernel: %w", err)
	}
	defer f.Close()
	var h [64]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("vz: kernel %s is too short to be an arm64 Image", path)
		}
		return fmt.Errorf("vz: kernel: %w", err)
	}
	const want = "the uncompressed arm64 Image (arch/arm64/boot/Image)"
	switch {
	case binary.LittleEndian.Uint32(h[0x38:]) == arm64ImageMagic:
		return nil
	case h[0] == 0x1f && h[1] == 0x8b:
		return fmt.Errorf("vz: kernel %s is gzip-compressed (Image.gz or vmlinuz): the Virtualization framework boots only %s; gunzip it", path, want)
	case bytes.Equal(h[0:2], []byte("MZ")) && bytes.Equal(h[4:8], []byte("zimg")):
		return fmt.Errorf("vz: kernel %s is an EFI zboot image (compressed vmlinuz): the Virtualization framework boots only %s; extract its payload", path, want)
	case bytes.Equal(h[0:4], []byte("\x7fELF")):
		return fmt.Errorf("vz: kernel %s is an ELF vmlinux (the qemu backend's PVH kernel is x86): the Virtualization framework boots only %s", path, want)
	}
	return fmt.Errorf("vz: kernel %s is not an arm64 Image (no ARM\\x64 magic at offset 0x38): the Virtualization framework boots only %s", path, want)
}
