// Package image builds capsem's default guest and keeps it in a
// content-addressed cache under $XDG_CACHE_HOME/capsem: the pinned Debian
// kernel (fetched with apt-get download, unpacked in Go), the ELF vmlinux
// inside its bzImage (for PVH boot), the kernel modules the guest needs in
// load order, a reproducible initramfs (newc cpio) whose /init is the
// static capsem-agent, and the root filesystem: an erofs image of Debian
// bookworm (mmdebstrap) with Node 22, npm and the agent CLIs installed from
// npm at pinned versions, no setuid or setgid bit anywhere.
//
// Two architectures are built (Target, TargetFor): amd64, booted by the
// qemu backend as a PVH vmlinux on microvm, and arm64, what the vz backend
// boots on Apple silicon and the qemu backend on -M virt: Debian's arm64
// kernel Image as the package ships it, virtio over PCI, the same
// recipe's packages and npm tools built for arm64, the same agent source
// cross-built. On an x86-64 host the arm64 root filesystem's programs run
// under qemu-user through binfmt_misc (binfmt_linux.go), and npm's install
// scripts run inside the tree (installscripts_linux.go), so that each
// package sees the guest's platform.
//
// Guest, BuildDefault and FindDefault are the whole guest as one unit for
// the CLI; List and Remove manage the cache. A normal user's build runs the
// root filesystem's steps in a user namespace where it is root
// (rootfs_userns_linux.go): mkfs.erofs records the files as that namespace
// sees them, root's, so the same tree gives the same image as root's build.
// The program calls RunRootfsJob first in main for it. CreateDataDisk makes a
// long-lived sandbox's writable disk (mkfs.ext4 on the new, empty file);
// GrowDataDisk only lengthens it, the guest grows the filesystem in it.
//
// It must never put anything in an image that was not named by its inputs
// (a pinned package, a checksum, a file the caller gave), it must never
// give the guest a network path of its own, and it must never run a host
// tool on a disk a guest has written: every byte of it is guest root's. Two inputs are named but not
// frozen: the Debian packages come from the suite as the mirror has it on
// the day of the build, and the npm packages' own dependencies are resolved
// then too; the cache key covers the recipe, so an image is rebuilt only
// when the recipe changes (or on Force).
package image
