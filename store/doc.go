// Package store is capsem's event log: an append-only, crash-safe record of
// everything a sandboxed run did: on the network, DNS answers, flows and
// HTTP requests, model calls with their tool calls and tool results; in the
// guest, the commands the host had it run (exec) and the changes in its
// workspace as the guest reported them (fs); and
// what the host saw of the guest agent (agent: it went silent, was cut off,
// had reports dropped or truncated).
//
// A store is a directory holding a pebble database. Each run of capsem is one
// session: [Store.Begin] records the session's metadata and returns a
// [Writer]; the netstack, the MITM proxy and the host side of the guest
// agent's control channel call [Writer.Append] from any goroutine; a
// background goroutine commits the appended events in group batches, each
// synced to the write-ahead log, so a committed batch survives a crash or
// SIGKILL of the process. [Writer.End] flushes, syncs and closes
// the session record. Readers ([Store.Sessions], [Store.Session],
// [Store.Events]) see every synced event, including the events of a session
// whose writer crashed before End.
//
// Layout of the keys (all sortable byte strings):
//
//	s/<session id>                     the session record (version byte, JSON: the
//	                                   session's metadata, counts, and the names and
//	                                   placeholders of its secrets — never a real value —
//	                                   for export --scrub)
//	e/<session id>/<seq, 8 bytes BE>   one event (version byte, binary fields)
//
// Sequence numbers start at 1 and are gap-free within a session; batches are
// committed in sequence order, so after a crash the events on disk are always
// a prefix 1..N of what was appended. Each event carries the SHA-256 of the
// one before it, and the session record the chain's head and an ed25519
// seal over it (chain.go, Options.SealKey): [Store.VerifyChain] names the
// first event an edit, a deletion or an insertion broke. The record is
// rewritten with a batch at most once a second (writer.go, recordEvery), so
// a crashed writer's last second of events follows its seal, chained. The event encoding is described in
// codec.go: a version byte, the wall time, then tagged fields, so that new
// kinds and new fields can be added without breaking old records.
//
// What this package must never do:
//
//   - drop an event silently. Append blocks when the write queue is full
//     (backpressure) rather than discard, as long as the committer makes
//     progress. An event that cannot be written is counted, logged,
//     reported by Sync, End and Err, and recorded as Counts.Lost in the
//     session record: appended after End, or after a write failed; or held
//     as a count while the disk is below its floor, while a commit has
//     stalled with the queue full, or once the session is past its byte
//     budget — each such run of held events is also written, where the
//     record resumes (or at End), as one RecordingUnstored event saying how
//     many, of which kinds, when and why.
//   - block for good. Append returns whatever the disk does (see above);
//     End and Close give a full disk closeGrace to free up, then return.
//   - stop the process on a full disk. A write that meets ENOSPC waits for
//     space instead of failing (pebble would stop the process on a failed
//     write-ahead-log or manifest write), while Admit refuses (fail
//     closed); if pebble still meets an error it cannot go on from, the
//     store is marked broken — every writer fails, Admit refuses, End and
//     Close return errors — and a process recording a session carries on;
//     everything synced before is there on the next Open.
//   - grow without bound. A session stores at most Options.MaxSessionBytes
//     (1 GiB unless told otherwise) and a small allowance of refusals after
//     it; the store keeps Options.MinFreeDisk (256 MiB) free on its disk:
//     below it Admit refuses, below a quarter of it nothing is written.
//   - rewrite an event. Keys are written once; Begin refuses a session id
//     that already exists, because a second writer would overwrite its
//     events.
//   - panic on what it reads. A value with an unknown version or garbage
//     bytes is reported as an error by the reader, naming the record.
//   - import anything of the rest of capsem.
//
// One process at a time may open a store directory; a second Open reports
// that the store is in use, and by which process id when it can.
package store
