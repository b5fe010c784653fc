// Package home is the contract of capsem's data directory: where a
// long-lived sandbox keeps its files (layout.go), the format of its
// settings.json (settings.go) and of its run.json, the launch record of a
// running supervisor (launch.go), the flock that tells running from
// stopped and crashed (lock.go), the status `capsem ls` shows from those
// files (status.go), where the API socket of a sandbox or of a running
// capsem run is (socket.go, with the fallback for paths too long for a
// unix socket address), where a capsem run keeps its session while it
// runs (sessiondir.go), and a sandbox's saved guests — its snapshots and
// its suspended state — with their records (snapshots.go).
//
// Everything that finds a sandbox reads it through this package: the CLI,
// the supervisor (sandbox/supervisor), the reader of a data directory's
// sessions (sandbox/storeview) and, by the same rules restated in their
// own language and checked against it, the clients in other languages
// (sdk/python: home_python_test.go).
//
// It must never start, stop or signal a process, boot a guest, or open an
// event store: it names paths, reads and writes the small files of the
// contract, and takes or tests the lock. It must never import the
// supervisor or the command line (imports point cmd → sandbox/supervisor →
// sandbox/home). The files' formats are read by older and newer capsem
// alike: add fields, never rename, retype or remove one.
package home
