package home

import "path/filepath"

// Each `capsem run` keeps its session in a directory of its own under the
// data directory while it runs:
//
//	<data>/sessions/<id>/
//	  events/      the run's event store (its writer's alone); moved into the
//	               main store at <data> when the run ends, or by the next
//	               command that opens the main store
//	  console.log  the guest's serial console
//	  api.sock     the run's snapshot socket (SocketPathIn): POST /v1/snapshot only
//	  snapshots/   the checkpoints readers asked for
//
// A directory whose events/ is still there holds a session not yet moved:
// running when its socket is there, else waiting for the next command.

// SessionDir is capsem run id's directory under data.
func SessionDir(data, id string) string { return filepath.Join(data, "sessions", id) }

// SessionEventsDir is capsem run id's event store.
func SessionEventsDir(data, id string) string { return filepath.Join(SessionDir(data, id), "events") }

// SessionEventsGlob matches the event stores of every run not yet moved
// into the main store; the id is the name of the directory above each.
func SessionEventsGlob(data string) string { return filepath.Join(data, "sessions", "*", "events") }

// SessionConsoleLog is the guest's serial console of capsem run id.
func SessionConsoleLog(data, id string) string {
	return filepath.Join(SessionDir(data, id), "console.log")
}

// SessionSocketPath is where the store-copy API of capsem run id listens.
func SessionSocketPath(data, id string) string { return SocketPathIn(SessionDir(data, id), id) }

// SessionStoreCopiesDir is where capsem run id makes its store's copies.
func SessionStoreCopiesDir(data, id string) string {
	return filepath.Join(SessionDir(data, id), "store-copies")
}
