// Command capsem is the user-facing CLI.
//
//   - `capsem run -- CMD` boots a fresh guest (hypervisor backend: QEMU on
//     Linux, vz on macOS with -tags vz) whose NIC ends in capsem's netstack
//     (policy, fake DNS, the MITM), runs CMD in it through the guest agent
//     over the control channel, streams it and exits with its code. Each run
//     records its events in a store of its own under
//     <data>/sessions/<id>/ and moves them into the main store when done
//     (sandbox/sessionstore), so runs can go concurrently.
//   - `capsem start|exec|shell|ls|stop|rm|policy reload` manage long-lived
//     sandboxes: their directories are sandbox/home's, their supervisor
//     (`capsem supervise`, hidden) and its making, spawning and stopping
//     sandbox/supervisor's.
//   - `capsem image build|ls|rm` builds the default guest (guest/image) and
//     manages the cache.
//   - `capsem sessions`, `inspect`, `export --sqlite` and `ui` read the event
//     store through sandbox/storeview; inspect's checks are
//     store/sqliteexport/inspect's.
//   - `capsem ca` manages the interception CA.
//
// It is glue: flags, messages, exit codes. What a sandbox, a session store
// or a check is, is in the library packages above, never here.
//
// It must never pass the host's environment into a guest beyond --env and
// TERM, LANG, TZ, nor leave a VM or a socket behind when it exits. It never
// binds a socket in a directory that is not its own and private
// (sandbox/home: socketdir.go, listen.go), and never puts a secret — the ui's token —
// on a command line, which every local user can read.
package main
