// Package image builds the pieces of capsem's default guest: the pinned
// Debian kernel (fetched with apt-get download, unpacked in Go), the ELF
// vmlinux inside its bzImage (for PVH boot), the kernel modules the guest
// needs in load order, a reproducible initramfs (newc cpio), and a
// content-addressed cache under $XDG_CACHE_HOME/capsem/images for all of it.
//
// It must never put anything in an image that was not named by its inputs
// (a pinned package, a checksum, a file the caller gave), so that the same
// inputs give the same bytes, and it must never give the guest a network
// path of its own.
package image
