package storeview

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
)

// mainStoreWait is how long a View waits for the main store while another
// capsem holds it (a run moving its session in, another reader): as long
// as they wait for it.
const mainStoreWait = 2 * time.Second

// Options are how a View holds what it reads.
type Options struct {
	// IdleClose is how long the main store stays open after its last
	// read; 0: Open opens it and it is held until Close.
	IdleClose time.Duration
	// Refresh is how old a running session's snapshot may be before a
	// read takes a new one, and how often the running sessions are looked
	// for again; 0: Open takes them once.
	Refresh time.Duration
	// Warn is told what the View leaves out and why (a running session
	// that gave no snapshot, sessions not yet moved); nil: no one is.
	Warn func(msg string)
}

// View is the sessions of a data directory: the main store and the running
// sessions' snapshots.
type View struct {
	data string
	o    Options
	main mainStore
	live liveSet
}

// Open is the View of the data directory data. With IdleClose 0 it moves
// the finished sessions into the main store and opens it now (a data
// directory where no session has ended yet has none, and is no error), and
// with Refresh 0 it takes the running sessions' snapshots now; otherwise
// each is done when a read needs it.
func Open(data string, o Options) (*View, error) {
	v := &View{data: data, o: o, main: mainStore{data: data, idle: o.IdleClose}, live: liveSet{data: data, every: o.Refresh, warn: o.Warn}}
	if o.IdleClose > 0 {
		return v, nil
	}
	pending, err := sessionstore.Merge(data, mainStoreWait)
	if err != nil {
		v.warn(fmt.Sprintf("warning: %v", err))
	}
	// Held until Close: its reference is never released.
	if _, err := v.main.acquire(); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	v.live.refresh()
	if n := pending - v.live.count(); n > 0 {
		v.warn(fmt.Sprintf("%d session(s) still running or not yet moved into %s are not included", n, data))
	}
	return v, nil
}

func (v *View) warn(msg string) {
	if v.o.Warn != nil {
		v.o.Warn(msg)
	}
}

// Close closes the main store and the snapshots, and removes the
// snapshots.
func (v *View) Close() {
	v.main.close()
	v.live.close()
}

// Sessions is every session, newest first: the main store's and the
// running ones'.
func (v *View) Sessions() ([]store.Session, error) {
	if v.o.IdleClose > 0 {
		// Finished runs move into the main store only while no one holds
		// it: now, before this process does. Errors are the next reader's
		// to report: the sessions that could be moved are listed.
		v.main.mergeIfClosed()
	}
	var all []store.Session
	st, err := v.main.acquire()
	switch {
	case errors.Is(err, store.ErrNotFound): // no main store yet: only running sessions
	case err != nil:
		return nil, err
	default:
		all, err = st.Sessions()
		v.main.release()
		if err != nil {
			return nil, err
		}
	}
	v.live.refresh()
	inMain := map[string]bool{}
	for _, s := range all {
		inMain[s.ID] = true
	}
	for _, s := range v.live.all() {
		if !inMain[s.ID] { // moved in since its run ended
			all = append(all, s)
		}
	}
	slices.SortStableFunc(all, func(a, b store.Session) int { return b.StartedAt.Compare(a.StartedAt) })
	return all, nil
}

// Live says whether id is a running session's (ui: the page follows it).
func (v *View) Live(id string) bool { return v.live.has(id) }

// LiveCount is how many running sessions the View reads.
func (v *View) LiveCount() int { return v.live.count() }

// Session is session id's record.
func (v *View) Session(id string) (store.Session, error) {
	if s := v.live.get(id); s != nil {
		defer s.mu.RUnlock()
		return s.snap.st.Session(id)
	}
	st, err := v.main.acquire()
	if err != nil {
		return store.Session{}, err
	}
	defer v.main.release()
	return st.Session(id)
}

// EventsAfter calls fn with session id's events after seq after, in order.
func (v *View) EventsAfter(id string, after uint64, fn func(store.Event) error) error {
	if s := v.live.get(id); s != nil {
		defer s.mu.RUnlock()
		return s.snap.st.EventsAfter(id, after, fn)
	}
	st, err := v.main.acquire()
	if err != nil {
		return err
	}
	defer v.main.release()
	return st.EventsAfter(id, after, fn)
}

// StoreOf is the store that holds every session of ids (the finished
// sessions' for none). It is for a View opened with Options{}: the store
// stays open, as it is, until Close.
func (v *View) StoreOf(ids []string) (*store.Store, error) {
	var found *store.Store
	for _, id := range ids {
		st := v.main.held()
		if l := v.live.store(id); l != nil {
			st = l
		}
		if st == nil {
			return nil, fmt.Errorf("session %s: %w", id, v.main.noneEnded())
		}
		if _, err := st.Session(id); err != nil {
			return nil, err
		}
		if found != nil && found != st {
			return nil, errors.New("these sessions are in different stores (a running sandbox's session is read apart): export each running session on its own, --session ID")
		}
		found = st
	}
	if found == nil {
		return v.Finished()
	}
	return found, nil
}

// Finished is the store of the sessions that have ended (see StoreOf).
func (v *View) Finished() (*store.Store, error) {
	st := v.main.held()
	if st == nil {
		return nil, v.main.noneEnded()
	}
	return st, nil
}
