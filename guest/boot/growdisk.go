package boot

import "fmt"

// ext4IocResizeFS is EXT4_IOC_RESIZE_FS, _IOW('f', 16, __u64): grow a
// mounted ext4 to the block count its argument points to. The number is
// the generic ioctl encoding, the one amd64 and arm64 (capsem's guests)
// use.
const ext4IocResizeFS = 1<<30 | 8<<16 | 'f'<<8 | 16

// ResizeBlocks is the block count of an ext4 filesystem with blockSize-byte
// blocks that fills a device of devSize bytes: the whole blocks the device
// holds (a tail shorter than a block stays unused, as mkfs.ext4 leaves it).
// The block size is the filesystem's (statfs), which ext4 keeps to a power
// of two from 1 KiB to 64 KiB; anything else, or a device smaller than one
// block, is an error rather than a count the kernel would be asked to
// resize to.
func ResizeBlocks(devSize, blockSize int64) (uint64, error) {
	if blockSize < 1024 || blockSize > 64<<10 || blockSize&(blockSize-1) != 0 {
		return 0, fmt.Errorf("block size %d is not an ext4 one (a power of two from 1024 to 65536)", blockSize)
	}
	if devSize < blockSize {
		return 0, fmt.Errorf("device of %d bytes holds not one %d-byte block", devSize, blockSize)
	}
	return uint64(devSize / blockSize), nil
}

// Growth is what GrowDisk did to a filesystem: its size as df shows it
// (statfs: its blocks less ext4's own overhead) before and after.
type Growth struct{ From, To int64 }

// Grew says whether the filesystem got larger.
func (g Growth) Grew() bool { return g.To > g.From }

func (g Growth) String() string {
	return fmt.Sprintf("grown from %d to %d MiB", g.From>>20, g.To>>20)
}
