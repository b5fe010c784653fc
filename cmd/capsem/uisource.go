package main

import (
	"errors"
	"sync"
	"time"

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
		deadline := time.Now().Add(2 * time.Second)
		for {
			st, err := store.OpenReadOnly(u.data)
			if err == nil {
				u.st = st
				break
			}
			if !errors.Is(err, store.ErrInUse) || time.Now().After(deadline) {
				return nil, err
			}
			time.Sleep(50 * time.Millisecond)
		}
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
}

func (u *uiStore) Sessions() ([]store.Session, error) {
	u.mu.Lock()
	if u.st == nil {
		// Finished runs move into the main store only while no one holds
		// it: now, before this process does. Errors are the next reader's
		// to report: the sessions that could be moved are listed.
		mergeRuns(u.data, 0)
	}
	u.mu.Unlock()
	st, err := u.acquire()
	if err != nil {
		return nil, err
	}
	defer u.release()
	return st.Sessions()
}

func (u *uiStore) Session(id string) (store.Session, error) {
	st, err := u.acquire()
	if err != nil {
		return store.Session{}, err
	}
	defer u.release()
	return st.Session(id)
}

func (u *uiStore) EventsAfter(id string, after uint64, fn func(store.Event) error) error {
	st, err := u.acquire()
	if err != nil {
		return err
	}
	defer u.release()
	return st.EventsAfter(id, after, fn)
}
