// Command snapbench measures capsem's snapshots (issue 29) with the real
// capsem binary against the real default guest (2 vCPUs, 2048 MiB), every
// ratio within one run on one machine, and prints its figures as a
// markdown block for docs/BENCHMARKS.md with the command that made them
// and each target beside its figure, met or missed:
//
//   - resume (resume.go): `capsem start NAME` of a suspended sandbox, and
//     that start plus the first `capsem exec NAME -- true`, over -rounds
//     rounds with a `capsem suspend` between them; target: the start's
//     p50 ≤ 400 ms;
//   - fork (fork.go): `capsem start --from SRC@TAG NEW` plus the first
//     `capsem exec NEW -- true` over -rounds new sandboxes, one at a time
//     (target: p50 ≤ 600 ms to exec-ready: the start returned, as for
//     resume), then eight forks of the same
//     snapshot started at once, each answering an exec: the wall time and
//     each one's;
//   - a touched guest (touched.go): 500 MiB of /dev/urandom written to
//     /dev/shm in the guest (tmpfs: it sits in the guest's RAM, and random
//     bytes are neither zero pages nor compressible), then `capsem
//     snapshot`: the guest's pause and the snapshot's bytes on disk as its
//     record (`capsem snapshots --json`) gives them; targets: pause ≤ 1 s,
//     files ≤ 600 MiB;
//   - the boot snapshot (bootsnap.go): `capsem run -- true` and a new
//     `capsem start` to exec-ready, each with --cold (the kernel booted)
//     and without (the boot snapshot restored), alternated; target: the
//     snapshot's p50 ≤ 0.4× the cold one's.
//
// Each fork and resume is checked to be one: a marker written to the
// source guest's /dev/shm before it was saved must be read back from the
// started guest (a cold boot has an empty /dev/shm). The check is an exec
// after the timed ones, not counted.
//
// Run it as `go tool task bench:snapshot` (root, as capsem needs for its
// image; the guest image is built first), from the repository's root. It
// uses its own temporary --data and --ca-dir and removes every sandbox it
// made (`capsem rm --force`) when it ends, also on a failure or an
// interrupt. Linux only: the qemu backend.
package main
