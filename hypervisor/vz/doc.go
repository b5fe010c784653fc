// Package vz is the macOS hypervisor backend: Apple's Virtualization
// framework through github.com/Code-Hex/vz/v3. It boots the guest with the
// framework's Linux boot loader (no firmware), attaches the root image
// read-only as the first virtio block device, gives the guest one
// virtio-net NIC on a datagram socket whose other end the caller hands to
// netstack, shares the workspace over virtio-fs, writes the virtio console
// (hvc0) to the console log, and talks to the guest agent over virtio-vsock:
// the agent listens on Options.ControlPort (capsem.vsock=PORT on the kernel
// command line) and the host connects to it.
//
// # Building
//
// The files that use the framework need cgo and the macOS SDK, so they are
// built only with the vz build tag on darwin:
//
//	CGO_ENABLED=1 go build -tags vz ./cmd/capsem
//	codesign --entitlements hypervisor/vz/vz.entitlements -s - capsem
//
// The binary must be signed with the com.apple.security.virtualization
// entitlement (vz.entitlements in this directory), or every VM
// configuration fails validation. Without the tag (any other OS, or a plain
// CGO_ENABLED=0 build on a Mac) the package still builds: New returns
// ErrNotBuilt, and DatagramPair, Options and the VM type stay available.
//
// # The guest
//
// Config.Kernel must be what the framework's Linux boot loader takes: on
// Apple silicon an uncompressed arm64 Image (arch/arm64/boot/Image; not
// Image.gz, not an EFI zboot vmlinuz — New checks the Image header); on an
// Intel Mac an x86-64 kernel in a form the framework's loader takes (not
// checked here). The PVH ELF vmlinux the qemu backend boots is an x86 file
// and does not boot on Apple silicon. The
// kernel (or its initramfs) needs the virtio-pci transport, virtio_console
// (hvc0), virtio_blk, virtio_net, virtiofs and vmw_vsock_virtio_transport.
//
// The kernel command line is hypervisor.BaseCmdline(0), console=hvc0,
// (root=/dev/vda ro when there is a root image but no initramfs),
// Config.Cmdline, and then Config.Boot's capsem.* words with what this
// backend owns set in it: capsem.root=/dev/vda with a root image,
// capsem.vsock=PORT and, with a workspace, capsem.ws=virtiofs (the mount tag
// is bootparam.WorkspaceTag, the guest's default).
//
// # The NIC
//
// The framework's file-handle attachment wants a connected SOCK_DGRAM
// socket, one Ethernet frame per datagram, not the SOCK_STREAM pair with
// 4-byte length prefixes the qemu backend uses: make the pair with
// DatagramPair, give vm to Config.NIC and wrap host with
// netstack.NewDatagramConn.
//
// What this package must never do: give the guest a network path that does
// not go through netstack. No NAT attachment, no bridged attachment, no
// vsock port but the control channel's.
package vz
