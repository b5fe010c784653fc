// Package storeview reads the sessions of a data directory as one: the
// main store, where finished sessions are (opened read-only, after the
// finished sessions still in their own stores are moved in), and the
// session of each running sandbox and capsem run, seen through a snapshot
// its process makes on request (POST /v1/snapshot on its API socket: a
// pebble checkpoint, hard links to the live store's files, opened
// read-only here and removed after). A running session is not in the main
// store until it ends, and its own store is held by its process.
//
// capsem sessions, inspect and export read through a View opened with
// Options{} (the main store held until Close, the snapshots taken once);
// capsem ui through one that closes the main store when idle and takes new
// snapshots as the page follows a running session (Options.IdleClose,
// Options.Refresh). A View is a ui.LiveSource.
//
// It must never write to the main store or to a running session's store
// (it moves finished sessions in through sessionstore.Merge, nothing
// else), never hold the main store while idle when told to close it (a
// store has one opener: capsem run's end waits for it), and never open or
// remove a snapshot outside the directory the sandbox's or run's own
// snapshots go (a socket in a shared fallback directory could be another
// user's naming any directory of ours).
package storeview
