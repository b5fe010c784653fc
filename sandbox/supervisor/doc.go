// Package supervisor runs a long-lived sandbox: the process that holds the
// sandbox's lock, its guest (through package sandbox; QEMU dies with it),
// the session's own event store (sandbox/sessionstore) and the API on its
// unix socket (sandbox/api), until it is stopped or its guest dies
// (supervise.go, backend.go); and the library side of the commands that
// manage one: Prepare and EnsureDisk make a sandbox's directory, image and
// disk, Spawn starts a supervisor detached and waits for its report
// (ready.go), Stop asks it to stop and waits for its lock. A running
// sandbox saves its guest into a snapshot or its suspended state
// (snapshot.go); a start resumes a suspended guest (restore.go), Fork
// makes a new sandbox whose first start resumes a snapshot (fork.go), and
// FromBoot one whose first start resumes the boot snapshot (fromboot.go).
//
// The capsem binary is the supervisor's process (`capsem supervise`): this
// package has no flags, prints nothing but its log, and leaves to its
// caller how it is started (the command line Spawn runs) and where a
// start's defaults come from. A sandbox's files and their formats are
// sandbox/home's; it writes only the ones home says the supervisor
// writes (lock, run.json, crash, the socket, snapshots/, suspended/).
//
// It must never leave a guest running without a holder of the lock (every
// path out of Run powers the guest off), never report ready before the
// guest's agent answers and the API listens, and never let a policy that
// does not load replace the one in force (a reload keeps the old one), and
// never resume a saved guest into another image, capsem or machine, nor
// one whose secrets' placeholders this start does not bind.
package supervisor
