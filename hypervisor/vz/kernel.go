package vz

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/capsem/capsem/guest/arch"
)

// checkKernel reports a kernel the framework's Linux boot loader on a host
// of architecture host does not start, with what to use instead. On arm64
// it wants the uncompressed Image (guest/image builds it for
// arch.ARM64), and fails late and without a reason on anything else; on an
// Intel Mac the one thing known not to boot is an arm64 Image (the
// framework runs guests of the host's architecture only).
func checkKernel(path string, host arch.Arch) error {
	switch host {
	case arch.ARM64, arch.AMD64:
	default:
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("vz: kernel: %w", err)
	}
	defer f.Close()
	h := make([]byte, 64)
	if _, err := io.ReadFull(f, h); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			if host == arch.AMD64 {
				return nil // not an arm64 Image; the rest is not checked here
			}
			return fmt.Errorf("vz: kernel %s is too short to be an arm64 Image: build the arm64 guest (capsem image build --arch arm64 on Linux) and use its Image", path)
		}
		return fmt.Errorf("vz: kernel: %w", err)
	}
	if host == arch.AMD64 {
		if arch.IsARM64Image(h) {
			return fmt.Errorf("vz: kernel %s is an arm64 Image and this Mac is Intel (amd64): the Virtualization framework runs guests of the host's architecture only; give an x86-64 kernel", path)
		}
		return nil
	}
	const want = "the uncompressed arm64 Image (arch/arm64/boot/Image; capsem image build --arch arm64 makes one)"
	switch {
	case arch.IsARM64Image(h):
		return nil
	case h[0] == 0x1f && h[1] == 0x8b:
		return fmt.Errorf("vz: kernel %s is gzip-compressed (Image.gz or vmlinuz): the Virtualization framework boots only %s; gunzip it", path, want)
	case bytes.Equal(h[0:2], []byte("MZ")) && bytes.Equal(h[4:8], []byte("zimg")):
		return fmt.Errorf("vz: kernel %s is an EFI zboot image (compressed vmlinuz): the Virtualization framework boots only %s; extract its payload", path, want)
	case bytes.Equal(h[0:4], []byte("\x7fELF")):
		return fmt.Errorf("vz: kernel %s is an ELF vmlinux (the qemu backend's x86 PVH kernel): the Virtualization framework boots only %s", path, want)
	}
	return fmt.Errorf("vz: kernel %s is not an arm64 Image (no ARM\\x64 magic at offset 0x38): the Virtualization framework boots only %s", path, want)
}
