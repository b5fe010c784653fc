package main

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/capsem/capsem/store"
)

// uiLiveRefresh is how old a running session's snapshot may be before
// capsem ui asks for a new one: the page follows a live session every two
// seconds, and a checkpoint (hard links and a sync) costs its run a few
// milliseconds.
const uiLiveRefresh = time.Second

// uiLive is the running sessions of a data directory (sandboxes and
// capsem runs), each read from a snapshot its process makes on request.
type uiLive struct {
	data string

	mu       sync.Mutex
	found    time.Time // when the sockets were last looked for
	sessions map[string]*liveSession
}

// liveSession is one running session's newest snapshot. Readers hold mu
// for reading while they use st; a refresh swaps it under the write lock.
type liveSession struct {
	sock liveSocket
	mu   sync.RWMutex
	snap liveStore
	at   time.Time
}

// refresh looks for running sessions again, at most once per
// uiLiveRefresh, snapshotting the new ones and forgetting those whose
// process is gone (their session is in the main store once moved).
func (u *uiLive) refresh() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if time.Since(u.found) < uiLiveRefresh {
		return
	}
	u.found = time.Now()
	seen := map[string]bool{}
	for _, l := range liveSockets(u.data) {
		seen[l.sock] = true
		known := false
		for _, s := range u.sessions {
			known = known || s.sock.sock == l.sock
		}
		if known {
			continue
		}
		snap, err := openSnapshot(context.Background(), l)
		if err != nil {
			continue
		}
		snap.sandbox = l.sandbox
		if u.sessions == nil {
			u.sessions = map[string]*liveSession{}
		}
		u.sessions[snap.session] = &liveSession{sock: l, snap: snap, at: time.Now()}
	}
	for id, s := range u.sessions {
		if !seen[s.sock.sock] {
			s.close()
			delete(u.sessions, id)
		}
	}
}

// get returns the running session id with a snapshot at most
// uiLiveRefresh old, read-locked: the caller calls RUnlock.
func (u *uiLive) get(id string) *liveSession {
	u.refresh()
	u.mu.Lock()
	s := u.sessions[id]
	u.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if time.Since(s.at) >= uiLiveRefresh {
		snap, err := openSnapshot(context.Background(), s.sock)
		switch {
		case err == nil:
			snap.sandbox = s.snap.sandbox
			s.snap.close()
			s.snap, s.at = snap, time.Now()
		case !fileExists(s.sock.sock):
			// It ended: its session is read from the main store once
			// moved there.
			s.snap.close()
			s.mu.Unlock()
			u.mu.Lock()
			if u.sessions[id] == s {
				delete(u.sessions, id)
			}
			u.mu.Unlock()
			return nil
		default:
			// Another error keeps the last snapshot, and the next try
			// is a second away: a run's API that hangs does not hold
			// every request for openSnapshot's 10 s.
			s.at = time.Now()
		}
	}
	s.mu.Unlock()
	s.mu.RLock()
	if s.snap.st == nil { // forgotten meanwhile
		s.mu.RUnlock()
		return nil
	}
	return s
}

// has says whether id is a running session's.
func (u *uiLive) has(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sessions[id] != nil
}

// all returns the records of the running sessions.
func (u *uiLive) all() []store.Session {
	u.mu.Lock()
	ids := make([]string, 0, len(u.sessions))
	for id := range u.sessions {
		ids = append(ids, id)
	}
	u.mu.Unlock()
	var out []store.Session
	for _, id := range ids {
		s := u.get(id)
		if s == nil {
			continue
		}
		if sess, err := s.snap.st.Session(id); err == nil {
			out = append(out, sess)
		}
		s.mu.RUnlock()
	}
	return out
}

func (s *liveSession) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.close()
}

func (u *uiLive) Close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, s := range u.sessions {
		s.close()
		delete(u.sessions, id)
	}
}

// close closes the snapshot's store and removes it.
func (l *liveStore) close() {
	if l.st != nil {
		l.st.Close()
		os.RemoveAll(l.dir)
		l.st = nil
	}
}
