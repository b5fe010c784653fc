// Command archbench measures the arm64 guest beside the amd64 one, in the
// same run on the same machine: the image build from nothing (`capsem
// image build --arch A --force`: kernel, Debian, npm, checks, erofs,
// initramfs; the downloads cache stays, as on a second build), and
// `capsem run --arch A -- true` from the boot snapshot and --cold. On an
// x86-64 host arm64 is emulated twice over: its image's programs under
// qemu-user, its guest under TCG; the build has a target (arm64 at most
// twice amd64), the runs have none.
//
// Run it as `go tool task bench:arch` (root; needs deps:arm64). Linux only.
package main
