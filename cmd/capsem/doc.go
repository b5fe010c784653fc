// Command capsem is the user-facing CLI.
//
//   - `capsem run -- CMD` boots a fresh guest (hypervisor backend: QEMU on
//     Linux, vz on macOS with -tags vz) whose NIC ends in capsem's netstack
//     (policy, fake DNS, the MITM), runs CMD in it through the guest agent
//     over the control channel, streams it and exits with its code. Each run
//     records its events in a store of its own under
//     <data>/sessions/<id>/ and moves them into the main store when done
//     (runstore.go), so runs can go concurrently.
//   - `capsem image build|ls|rm` builds the default guest (guest/image) and
//     manages the cache.
//   - `capsem sessions`, `inspect`, `export --sqlite` read the event store.
//   - `capsem ca` manages the interception CA.
//
// It must never pass the host's environment into a guest beyond --env and
// TERM, LANG, TZ, nor leave a VM or a socket behind when it exits. It never
// binds a socket in a directory that is not its own and private
// (socketdir.go, listenunix.go), and never puts a secret — the ui's token —
// on a command line, which every local user can read.
package main
