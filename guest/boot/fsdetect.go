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
	ext4Magic     = 0xEF53     // s_magic, little-endian at offset 1024+56
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

// IsExt4 says whether the disk's superblock is an ext2/3/4 one (the
// writable layer's disk, which the host formats as ext4).
func IsExt4(r io.ReaderAt) bool {
	var b [2]byte
	_, err := r.ReadAt(b[:], 1024+56)
	return err == nil && binary.LittleEndian.Uint16(b[:]) == ext4Magic
}
