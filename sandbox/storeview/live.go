package storeview

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/store"
)

// liveSet is the running sessions of a data directory (sandboxes and
// capsem runs), each read from a snapshot its process makes on request.
type liveSet struct {
	data  string
	every time.Duration // Options.Refresh: 0, once
	warn  func(string)  // nil: a session without a snapshot is left out silently

	mu       sync.Mutex
	found    time.Time // when the sockets were last looked for
	sessions map[string]*liveSession
}

// liveSession is one running session's newest snapshot. Readers hold mu
// for reading while they use snap; a refresh swaps it under the write lock.
type liveSession struct {
	sock liveSocket
	mu   sync.RWMutex
	snap snapshot
	at   time.Time
}

// refresh looks for running sessions again, once or at most once per
// every, snapshotting the new ones and forgetting those whose process is
// gone (their session is in the main store once moved).
func (u *liveSet) refresh() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.found.IsZero() && (u.every == 0 || time.Since(u.found) < u.every) {
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
		snap, err := openStoreCopy(context.Background(), l)
		if err != nil {
			if u.warn != nil {
				u.warn(fmt.Sprintf("%s's running session is not included: %v", l.what, err))
			}
			continue
		}
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

// get returns the running session id with a snapshot at most every old
// (with every 0, the one taken first), read-locked: the caller calls
// RUnlock.
func (u *liveSet) get(id string) *liveSession {
	u.refresh()
	u.mu.Lock()
	s := u.sessions[id]
	u.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if u.every > 0 && time.Since(s.at) >= u.every {
		snap, err := openStoreCopy(context.Background(), s.sock)
		switch {
		case err == nil:
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
			// is every away: a run's API that hangs does not hold
			// every request for openStoreCopy's 10 s.
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

// store is the snapshot's store of running session id, or nil, for a set
// that never refreshes (every 0): nothing swaps it until close.
func (u *liveSet) store(id string) *store.Store {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s := u.sessions[id]; s != nil && u.every == 0 {
		return s.snap.st
	}
	return nil
}

// has says whether id is a running session's.
func (u *liveSet) has(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sessions[id] != nil
}

func (u *liveSet) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.sessions)
}

// all returns the records of the running sessions.
func (u *liveSet) all() []store.Session {
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

func (u *liveSet) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, s := range u.sessions {
		s.close()
		delete(u.sessions, id)
	}
}

// liveSocket is the API socket of a running sandbox or capsem run.
type liveSocket struct {
	sock  string
	snaps string // the directory its snapshots must be made in
	what  string // "sandbox NAME" or "capsem run ID", for messages
}

// liveSockets are the sockets of data's running sandboxes (those whose
// lock is held) and running capsem runs (those whose session directory
// still has its events and its socket).
func liveSockets(data string) []liveSocket {
	var out []liveSocket
	dirs, _ := home.List(data)
	for _, d := range dirs {
		if d.Locked() {
			out = append(out, liveSocket{sock: d.SocketPath(), snaps: d.StoreCopiesDir(), what: "sandbox " + d.Name})
		}
	}
	runs, _ := filepath.Glob(home.SessionEventsGlob(data))
	for _, r := range runs {
		id := filepath.Base(filepath.Dir(r))
		if sock := home.SessionSocketPath(data, id); fileExists(sock) {
			out = append(out, liveSocket{sock: sock, snaps: home.SessionStoreCopiesDir(data, id), what: "capsem run " + id})
		}
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// snapshot is one running session's snapshot, open read-only.
type snapshot struct {
	session string
	dir     string
	st      *store.Store
}

// openStoreCopy asks the API on l.sock for a snapshot of its session's
// store and opens it read-only; close removes it. The snapshot must be a
// new directory right under l.snaps: the reader removes it afterwards, and
// a socket that fell back to a shared directory ($XDG_RUNTIME_DIR or /tmp,
// for a long path) could be answered by another user naming any directory
// of ours.
func openStoreCopy(ctx context.Context, l liveSocket) (snapshot, error) {
	client := api.NewClient(l.sock)
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, err := client.StoreCopy(ctx)
	if err != nil {
		return snapshot{}, err
	}
	if filepath.Dir(filepath.Clean(snap.Dir)) != filepath.Clean(l.snaps) || filepath.Base(snap.Dir) == ".." {
		return snapshot{}, fmt.Errorf("%s answered with a snapshot at %s, not in %s: not read, not removed", l.what, snap.Dir, l.snaps)
	}
	st, err := store.OpenReadOnly(snap.Dir)
	if err != nil {
		os.RemoveAll(snap.Dir)
		return snapshot{}, err
	}
	return snapshot{session: snap.SessionID, dir: snap.Dir, st: st}, nil
}

// close closes the snapshot's store and removes it.
func (l *snapshot) close() {
	if l.st != nil {
		l.st.Close()
		os.RemoveAll(l.dir)
		l.st = nil
	}
}
