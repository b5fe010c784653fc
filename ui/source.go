package ui

import "github.com/capsem/capsem/store"

// Source is where the viewer reads sessions. *store.Store is one.
type Source interface {
	// Sessions returns the sessions, newest first: every one, or, for a
	// CountedSource, perhaps only the newest.
	Sessions() ([]store.Session, error)
	// Session returns one session's record; an unknown id is an error
	// wrapping store.ErrNotFound.
	Session(id string) (store.Session, error)
	// EventsAfter calls fn with the events of session id whose Seq is
	// above after, in order, until fn returns an error, which it returns.
	EventsAfter(id string, after uint64, fn func(store.Event) error) error
}

// LiveSource is a Source that knows which sessions are still being
// written: their pages follow them as events arrive. A Source without
// it has none (an exported file).
type LiveSource interface {
	Source
	Live(id string) bool
}

// CountedSource is a Source whose Sessions may list only the newest of its
// sessions — an exported file someone sent, read by sqliteexport.Reader,
// lists at most its newest 1,000 — and says how many it holds, so that
// the list says when it was cut. Session reads any of them by id.
type CountedSource interface {
	Source
	SessionCount() (int64, error)
}
