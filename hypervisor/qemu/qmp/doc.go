// Package qmp is a client of QEMU's machine protocol (QMP) on a unix
// socket: the greeting and capabilities handshake, one command at a time
// with its answer or its typed error, events set aside for a callback, and
// a file descriptor passed beside a command (SCM_RIGHTS, for getfd and
// add-fd) — what pausing a guest, saving its state and restoring it take.
//
// The wire format, one JSON object per line in each direction (QEMU's
// docs/interop/qmp-spec):
//
//	QEMU → client, once:  {"QMP": {"version": {...}, "capabilities": [...]}}
//	client → QEMU:        {"execute": "CMD", "arguments": {...}, "id": N}
//	QEMU → client:        {"return": ..., "id": N}
//	                      {"error": {"class": "...", "desc": "..."}, "id": N}
//	                      {"event": "NAME", "data": {...}, "timestamp": {...}}
//
// Stability: QMP is QEMU's; commands and their arguments change between
// QEMU versions (a restore must check the version the state was saved
// with). This package passes them through and interprets none.
//
// What it must never do: send a command before the handshake completed,
// run two commands at once on one connection (QMP answers in order; a
// second command waits for the first's answer), or read an answer of
// another command as its own (answers are matched by id). It never starts
// or kills QEMU: the backend owns the process.
package qmp
