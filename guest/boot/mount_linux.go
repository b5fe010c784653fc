package boot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsem/capsem/guest/bootparam"
)

// Mount is one mount(2) of a plan.
type Mount struct {
	Source, Target, FSType string
	Flags                  uintptr
	Data                   string
	Mode                   os.FileMode // for creating Target
	Optional               bool        // a failure is a warning, not an error
}

func (m Mount) String() string {
	return fmt.Sprintf("%s on %s type %s (%s)", m.Source, m.Target, m.FSType, m.Data)
}

const (
	nosuidNodev       = unix.MS_NOSUID | unix.MS_NODEV
	nosuidNodevNoexec = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
)

// EarlyMounts are the initramfs's first mounts: the kernel's filesystems
// and a /run that later moves into the real root.
func EarlyMounts() []Mount {
	return []Mount{
		{Source: "devtmpfs", Target: "/dev", FSType: "devtmpfs", Flags: unix.MS_NOSUID, Data: "mode=0755", Mode: 0o755},
		{Source: "proc", Target: "/proc", FSType: "proc", Flags: nosuidNodevNoexec, Mode: 0o555},
		{Source: "sysfs", Target: "/sys", FSType: "sysfs", Flags: nosuidNodevNoexec, Mode: 0o555},
		{Source: "tmpfs", Target: "/run", FSType: "tmpfs", Flags: nosuidNodev, Data: "mode=0755", Mode: 0o755},
	}
}

// SystemMounts complete the final root: terminals, shared memory, /tmp.
func SystemMounts() []Mount {
	return []Mount{
		{Source: "devpts", Target: "/dev/pts", FSType: "devpts", Flags: unix.MS_NOSUID | unix.MS_NOEXEC, Data: "gid=5,mode=0620,ptmxmode=0666", Mode: 0o755},
		{Source: "tmpfs", Target: "/dev/shm", FSType: "tmpfs", Flags: nosuidNodev, Data: "mode=1777", Mode: 0o1777},
		{Source: "tmpfs", Target: "/tmp", FSType: "tmpfs", Flags: nosuidNodev, Data: "mode=1777", Mode: 0o1777},
	}
}

// NineP is the 9p mount option string for the workspace under QEMU
// (-virtfs / virtio-9p-device): the kernel clamps msize to what the
// transport supports; cache=mmap allows shared writable mappings, which
// some tools need.
const NineP = "trans=virtio,version=9p2000.L,msize=512000,cache=mmap"

// WorkspaceMount is the workspace's mount, or false when there is none.
func WorkspaceMount(c bootparam.BootParams) (Mount, bool) {
	switch c.WSFS {
	case "9p":
		return Mount{Source: c.WSTag, Target: c.WSPath, FSType: "9p", Flags: nosuidNodev, Data: NineP, Mode: 0o755}, true
	case "virtiofs":
		return Mount{Source: c.WSTag, Target: c.WSPath, FSType: "virtiofs", Flags: nosuidNodev, Mode: 0o755}, true
	}
	return Mount{}, false
}

// RootLayout names the directories MountRoot uses.
type RootLayout struct {
	Lower  string // the read-only image
	RW     string // the tmpfs or ext4 disk holding the overlay's upper and work directories
	Target string // the overlay: the new root
}

// RWDiskOptions are the writable disk's ext4 mount options. discard hands
// the space of deleted files back to the host (QEMU punches it out of the
// sparse file: `capsem ls` shows what the disk holds, not what it ever
// held); noinit_itable skips zeroing inode tables in the background, which
// the host's sparse file already reads as zeros, so that a fresh disk costs
// the guest's CPU nothing after boot.
const RWDiskOptions = "discard,noinit_itable"

// DefaultRootLayout keeps the image and the tmpfs under /run/capsem (which
// moves into the new root, so they stay visible there for diagnostics) and
// builds the new root at /newroot in the initramfs.
var DefaultRootLayout = RootLayout{Lower: "/run/capsem/lower", RW: "/run/capsem/rw", Target: "/newroot"}

// RootMounts is the plan for the root: the image read-only, the writable
// layer, and an overlay of the two. The writable layer is the ext4 disk
// rwDev, or with rwDev "" a tmpfs of rwSize ("" for the default, half of
// RAM).
func RootMounts(dev, fstype, rwDev string, l RootLayout, rwSize string) []Mount {
	rw := Mount{Source: "tmpfs", Target: l.RW, FSType: "tmpfs", Flags: unix.MS_NODEV, Data: "mode=0755", Mode: 0o755}
	if rwSize != "" {
		rw.Data += ",size=" + rwSize
	}
	if rwDev != "" {
		rw = Mount{Source: rwDev, Target: l.RW, FSType: "ext4", Flags: unix.MS_NODEV, Data: RWDiskOptions, Mode: 0o755}
	}
	return []Mount{
		{Source: dev, Target: l.Lower, FSType: fstype, Flags: unix.MS_RDONLY | unix.MS_NODEV, Mode: 0o755},
		rw,
		{Source: "overlay", Target: l.Target, FSType: "overlay", Data: fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work",
			l.Lower, l.RW, l.RW), Mode: 0o755},
	}
}

// Do performs a mount, creating its target first. An already-mounted
// target (EBUSY) counts as done.
func Do(m Mount) error {
	mode := m.Mode
	if mode == 0 {
		mode = 0o755
	}
	if err := os.MkdirAll(m.Target, mode); err != nil {
		return fmt.Errorf("mkdir %s: %w", m.Target, err)
	}
	if err := unix.Mount(m.Source, m.Target, m.FSType, m.Flags, m.Data); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil
		}
		return fmt.Errorf("mount %s: %w", m, err)
	}
	return nil
}

// DoAll performs a plan in order. A failing optional mount is returned as a
// warning; a failing required one stops the plan.
func DoAll(plan []Mount) (warnings []string, err error) {
	for _, m := range plan {
		if err := Do(m); err != nil {
			if m.Optional {
				warnings = append(warnings, err.Error())
				continue
			}
			return warnings, err
		}
	}
	return warnings, nil
}

// WaitFile waits until path exists (a block device appearing in devtmpfs).
func WaitFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v: is the disk attached and its driver (virtio_blk) in the module list?", path, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// MountRoot mounts the root image dev (erofs or squashfs; fstype "" to
// detect it) read-only under a writable overlay at l.Target — its upper
// layer on the ext4 disk rwDev, or in a tmpfs when rwDev is "" — and
// describes what it did. A disk that is not ext4 is refused, never
// formatted: the host makes it (guest/image.CreateDataDisk).
func MountRoot(dev, fstype, rwDev string, l RootLayout, rwSize string) (string, error) {
	if fstype == "" {
		f, err := os.Open(dev)
		if err != nil {
			return "", fmt.Errorf("root image: %w", err)
		}
		fstype, err = DetectFS(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("root image %s: %w", dev, err)
		}
	}
	layer := "tmpfs"
	if rwDev != "" {
		if err := WaitFile(rwDev, 10*time.Second); err != nil {
			return "", fmt.Errorf("writable disk: %w", err)
		}
		f, err := os.Open(rwDev)
		if err != nil {
			return "", fmt.Errorf("writable disk: %w", err)
		}
		ok := IsExt4(f)
		f.Close()
		if !ok {
			return "", fmt.Errorf("writable disk %s has no ext4 superblock: the host formats it (capsem rm, then start, makes a new one)", rwDev)
		}
		layer = "ext4 " + rwDev
	}
	plan := RootMounts(dev, fstype, rwDev, l, rwSize)
	if err := Do(plan[0]); err != nil {
		return "", err
	}
	if err := Do(plan[1]); err != nil {
		return "", fmt.Errorf("writable layer: %w", err)
	}
	for _, d := range []string{l.RW + "/upper", l.RW + "/work"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := Do(plan[2]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s (read-only) + %s overlay", fstype, dev, layer), nil
}

// SwitchRoot makes newRoot the root, as switch_root(8) does: it moves
// /dev, /proc, /sys and /run into newRoot, frees the initramfs's files
// (they are RAM), moves newRoot onto / and chroots into it. Only for PID 1
// in an initramfs.
func SwitchRoot(newRoot string) error {
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		return fmt.Errorf("switch root: statfs /: %w", err)
	}
	if st.Type != unix.RAMFS_MAGIC && st.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("switch root: / is not an initramfs (fs type %#x)", st.Type)
	}
	for _, d := range []string{"/dev", "/proc", "/sys", "/run"} {
		dst := filepath.Join(newRoot, d)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("switch root: %w", err)
		}
		if err := unix.Mount(d, dst, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("switch root: move %s: %w", d, err)
		}
	}
	var rootSt unix.Stat_t
	if err := unix.Lstat("/", &rootSt); err != nil {
		return fmt.Errorf("switch root: %w", err)
	}
	RemoveSameDevice("/", rootSt.Dev, newRoot) // best effort: only memory is at stake
	if err := unix.Chdir(newRoot); err != nil {
		return fmt.Errorf("switch root: %w", err)
	}
	if err := unix.Mount(newRoot, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("switch root: move %s to /: %w", newRoot, err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("switch root: chroot: %w", err)
	}
	return unix.Chdir("/")
}

// RemoveSameDevice removes everything under dir that lives on device dev,
// never descending into another filesystem and never touching skip.
// Directories that cannot be emptied stay.
func RemoveSameDevice(dir string, dev uint64, skip string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if p == skip {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Dev != dev {
			continue // another filesystem mounted here
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			RemoveSameDevice(p, dev, skip)
			_ = unix.Rmdir(p)
			continue
		}
		_ = unix.Unlink(p)
	}
}

// DangerousDevices are the nodes devtmpfs creates that give root raw
// access to physical memory or I/O ports. The guest has no use for them.
var DangerousDevices = []string{"mem", "kmem", "port"}

// RemoveDangerousDevices deletes DangerousDevices from dev (normally
// /dev) and returns the ones it removed; an absent one is fine.
func RemoveDangerousDevices(dev string) ([]string, error) {
	var removed []string
	for _, n := range DangerousDevices {
		p := filepath.Join(dev, n)
		err := os.Remove(p)
		switch {
		case err == nil:
			removed = append(removed, p)
		case !os.IsNotExist(err):
			return removed, fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return removed, nil
}
