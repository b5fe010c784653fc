package boot

import (
	"encoding/binary"
	"errors"
	"io"
)

// Superblock magics.
const (
	squashfsMagic = 0x73717368 // "hsqs", little-endian at offset 0
	erofsMagic    = 0xE0F5E1E2 // little-endian at offset 1024
)

// ErrUnknownFS means the image's superblock is neither erofs nor squashfs.
var ErrUnknownFS = errors.New("not an erofs or squashfs image")

// DetectFS reads a root image's superblock and names its filesystem:
// "erofs" or "squashfs".
func DetectFS(r io.ReaderAt) (string, error) {
	var b [4]byte
	if _, err := r.ReadAt(b[:], 0); err == nil && binary.LittleEndian.Uint32(b[:]) == squashfsMagic {
		return "squashfs", nil
	}
	if _, err := r.ReadAt(b[:], 1024); err == nil && binary.LittleEndian.Uint32(b[:]) == erofsMagic {
		return "erofs", nil
	}
	return "", ErrUnknownFS
}
