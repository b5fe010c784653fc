package boot

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GrowDisk grows the ext4 filesystem mounted at dir to fill its block
// device dev, online, with the kernel's EXT4_IOC_RESIZE_FS: the host only
// lengthens the writable disk's file (capsem start --disk; see
// guest/image.GrowDataDisk), because the filesystem in it is the guest's
// and no host tool may parse it. The guest kernel does the work, with no
// userspace tool; when the filesystem already fills the device the kernel
// does nothing, so PID 1 calls it on every boot. The kernel refuses a
// filesystem it found errors in, and never shrinks one.
func GrowDisk(dev, dir string) (Growth, error) {
	var g Growth
	f, err := os.Open(dev)
	if err != nil {
		return g, fmt.Errorf("grow %s: %w", dev, err)
	}
	var devSize uint64
	err = ioctlPtr(f, unix.BLKGETSIZE64, unsafe.Pointer(&devSize))
	f.Close()
	if err != nil {
		return g, fmt.Errorf("grow %s: its size (BLKGETSIZE64): %w", dev, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return g, fmt.Errorf("grow %s: %w", dev, err)
	}
	defer d.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(d.Fd()), &st); err != nil {
		return g, fmt.Errorf("grow %s: statfs %s: %w", dev, dir, err)
	}
	if st.Type != unix.EXT4_SUPER_MAGIC {
		return g, fmt.Errorf("grow %s: %s is not an ext4 mount (fs type %#x)", dev, dir, st.Type)
	}
	g.From = int64(st.Blocks) * st.Bsize
	blocks, err := ResizeBlocks(int64(devSize), st.Bsize)
	if err != nil {
		return g, fmt.Errorf("grow %s: %w", dev, err)
	}
	if err := ioctlPtr(d, ext4IocResizeFS, unsafe.Pointer(&blocks)); err != nil {
		return g, fmt.Errorf("grow %s to %d blocks of %d bytes (EXT4_IOC_RESIZE_FS): %w", dev, blocks, st.Bsize, err)
	}
	if err := unix.Fstatfs(int(d.Fd()), &st); err != nil {
		return g, fmt.Errorf("grow %s: statfs %s: %w", dev, dir, err)
	}
	g.To = int64(st.Blocks) * st.Bsize
	return g, nil
}

// ioctlPtr is ioctl(2) with a pointer argument.
func ioctlPtr(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
