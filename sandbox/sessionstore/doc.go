// Package sessionstore is the event store of one session while it is
// recorded, and the moving of finished sessions into the data directory's
// main store. Each `capsem run` and each start of a long-lived sandbox
// writes its events to a store of its own (a pebble store has one writer,
// and any number of runs go at once):
//
//	<data>/sessions/<id>/events/   the session's own store, while it is recorded
//	<data>/                        the main store, where finished sessions are read
//
// When the session ends it is moved into the main store (Merge); one that
// could not be (the main store was busy, capsem was killed) is moved by the
// next command that opens the main store. While it is recorded, readers see
// it through copies (Store.StoreCopy: a checkpoint after a sync) that the
// supervisor's API or a run's snapshot socket (ServeStoreCopies) hands out.
//
// It must never hold the main store longer than one merge (other
// processes wait for it, a few seconds at most), never remove a session's
// own store before its events are in the main store, and never start a
// guest or read the sandboxes' files: where a session's directory is, is
// sandbox/home's.
package sessionstore
