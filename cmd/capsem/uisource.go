package main

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
)

// uiIdleClose is how long capsem ui keeps the main store open after its
// last read. A store has one opener at a time: while capsem ui holds it, a
// run that ends cannot move its session in (the next command does) and
// capsem sessions cannot read it. A second of grace serves a page's few
// requests (the page, its host summary, its next rows) from one open,
// without holding the store while no one reads.
const uiIdleClose = time.Second

// uiStore is the main store of a data directory as capsem ui's Source: it
// moves finished runs in before listing sessions, opens the store read-only
// when a request needs it and closes it once no request has for
// uiIdleClose.
type uiStore struct {
	data string
	live uiLive // the running sessions, read from snapshots

	mu    sync.Mutex
	st    *store.Store
	refs  int
	timer *time.Timer
}

func (u *uiStore) acquire() (*store.Store, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	if u.st == nil {
		// Another capsem may hold the store for a moment (a run moving
		// its session in, capsem sessions reading it): wait as long as
		// they wait for it.
		st, err := sessionstore.OpenReadOnlyWait(u.data, 2*time.Second)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no session has ended in %s yet: %w", u.data, store.ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		u.st = st
	}
	u.refs++
	return u.st, nil
}

func (u *uiStore) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.refs--
	if u.refs == 0 {
		u.timer = time.AfterFunc(uiIdleClose, u.closeIdle)
	}
}

func (u *uiStore) closeIdle() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.refs == 0 && u.st != nil {
		u.st.Close()
		u.st = nil
	}
}

// Close closes the store if it is open.
func (u *uiStore) Close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.timer != nil {
		u.timer.Stop()
	}
	if u.st != nil {
		u.st.Close()
		u.st = nil
	}
	u.live.Close()
}

func (u *uiStore) Sessions() ([]store.Session, error) {
	u.mu.Lock()
	if u.st == nil {
		// Finished runs move into the main store only while no one holds
		// it: now, before this process does. Errors are the next reader's
		// to report: the sessions that could be moved are listed.
		sessionstore.Merge(u.data, 0)
	}
	u.mu.Unlock()
	var all []store.Session
	st, err := u.acquire()
	switch {
	case errors.Is(err, store.ErrNotFound): // no main store yet: only running sessions
	case err != nil:
		return nil, err
	default:
		all, err = st.Sessions()
		u.release()
		if err != nil {
			return nil, err
		}
	}
	u.live.refresh()
	inMain := map[string]bool{}
	for _, s := range all {
		inMain[s.ID] = true
	}
	for _, s := range u.live.all() {
		if !inMain[s.ID] { // moved in since its run ended
			all = append(all, s)
		}
	}
	slices.SortStableFunc(all, func(a, b store.Session) int { return b.StartedAt.Compare(a.StartedAt) })
	return all, nil
}

// Live says whether id is a running session's: the page follows it.
func (u *uiStore) Live(id string) bool { return u.live.has(id) }

func (u *uiStore) Session(id string) (store.Session, error) {
	if s := u.live.get(id); s != nil {
		defer s.mu.RUnlock()
		return s.snap.st.Session(id)
	}
	st, err := u.acquire()
	if err != nil {
		return store.Session{}, err
	}
	defer u.release()
	return st.Session(id)
}

func (u *uiStore) EventsAfter(id string, after uint64, fn func(store.Event) error) error {
	if s := u.live.get(id); s != nil {
		defer s.mu.RUnlock()
		return s.snap.st.EventsAfter(id, after, fn)
	}
	st, err := u.acquire()
	if err != nil {
		return err
	}
	defer u.release()
	return st.EventsAfter(id, after, fn)
}
