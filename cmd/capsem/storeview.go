package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/store"
)

// storeView is what capsem sessions, inspect and export read: the main
// store, and the session of each running sandbox, seen through a snapshot
// its supervisor writes on request (POST /v1/snapshot: a pebble checkpoint,
// hard links to the live store's files, opened read-only here and removed
// after). A running sandbox's session is not in the main store until it
// stops, and its store is held by its supervisor.
type storeView struct {
	main *store.Store // nil while no session has ended in data: the first to end makes the store
	data string
	live []liveStore
}

// liveStore is one running sandbox's snapshot.
type liveStore struct {
	sandbox string
	session string
	dir     string
	st      *store.Store
}

// openStoreView opens the main store of --data for reading, after moving
// finished sessions into it, and snapshots the sessions of running
// sandboxes and runs.
func openStoreView(c *cli.Context) (*storeView, error) {
	main, pending, err := openStoreForReading(c)
	if errors.Is(err, fs.ErrNotExist) {
		// Nothing has ended here yet; running sessions are read below.
		main, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := &storeView{main: main, data: c.String("data")}
	for _, l := range liveSockets(c.String("data")) {
		ls, err := openSnapshot(c.Context, l)
		if err != nil {
			fmt.Fprintf(c.App.ErrWriter, "capsem: %s's running session is not included: %v\n", l.what, err)
			continue
		}
		ls.sandbox = l.sandbox
		v.live = append(v.live, ls)
	}
	if n := pending - len(v.live); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "capsem: %d session(s) still running or not yet moved into %s are not included\n", n, c.String("data"))
	}
	return v, nil
}

// liveSocket is the API socket of a running sandbox or capsem run.
type liveSocket struct {
	sock    string
	snaps   string // the directory its snapshots must be made in
	what    string // "sandbox NAME" or "capsem run ID", for messages
	sandbox string
}

// liveSockets are the sockets of data's running sandboxes (those whose
// lock is held) and running capsem runs (those whose session directory
// still has its events and its socket).
func liveSockets(data string) []liveSocket {
	var out []liveSocket
	dirs, _ := home.List(data)
	for _, d := range dirs {
		if d.Locked() {
			out = append(out, liveSocket{sock: d.SocketPath(), snaps: d.SnapshotsDir(), what: "sandbox " + d.Name, sandbox: d.Name})
		}
	}
	runs, _ := filepath.Glob(home.SessionEventsGlob(data))
	for _, r := range runs {
		id := filepath.Base(filepath.Dir(r))
		if sock := home.SessionSocketPath(data, id); fileExists(sock) {
			out = append(out, liveSocket{sock: sock, snaps: home.SessionSnapshotsDir(data, id), what: "capsem run " + id})
		}
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// openSnapshot asks the API on l.sock for a snapshot of its session's
// store and opens it read-only; Close of the storeView removes it. The
// snapshot must be a new directory right under l.snaps: the reader removes
// it afterwards, and a socket that fell back to a shared directory
// ($XDG_RUNTIME_DIR or /tmp, for a long path) could be answered by another
// user naming any directory of ours.
func openSnapshot(ctx context.Context, l liveSocket) (liveStore, error) {
	client := api.NewClient(l.sock)
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, err := client.Snapshot(ctx)
	if err != nil {
		return liveStore{}, err
	}
	if filepath.Dir(filepath.Clean(snap.Dir)) != filepath.Clean(l.snaps) || filepath.Base(snap.Dir) == ".." {
		return liveStore{}, fmt.Errorf("%s answered with a snapshot at %s, not in %s: not read, not removed", l.what, snap.Dir, l.snaps)
	}
	st, err := store.OpenReadOnly(snap.Dir)
	if err != nil {
		os.RemoveAll(snap.Dir)
		return liveStore{}, err
	}
	return liveStore{session: snap.SessionID, dir: snap.Dir, st: st}, nil
}

func (v *storeView) Close() {
	if v.main != nil {
		v.main.Close()
	}
	for i := range v.live {
		v.live[i].close()
	}
}

// Sessions is every session, newest first, and which of them are running.
func (v *storeView) Sessions() ([]store.Session, map[string]bool, error) {
	var all []store.Session
	if v.main != nil {
		var err error
		if all, err = v.main.Sessions(); err != nil {
			return nil, nil, err
		}
	}
	running := map[string]bool{}
	for _, l := range v.live {
		s, err := l.st.Session(l.session)
		if err != nil {
			continue
		}
		all = append(all, s)
		running[s.ID] = true
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].StartedAt.After(all[j].StartedAt) })
	return all, running, nil
}

// storeOf is the store that holds every session of ids.
func (v *storeView) storeOf(ids []string) (*store.Store, error) {
	var found *store.Store
	for _, id := range ids {
		st := v.main
		for _, l := range v.live {
			if l.session == id {
				st = l.st
			}
		}
		if st == nil {
			return nil, fmt.Errorf("session %s: %w", id, v.noneEnded())
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
		return v.finished()
	}
	return found, nil
}

// finished is the store of the sessions that have ended.
func (v *storeView) finished() (*store.Store, error) {
	if v.main == nil {
		return nil, v.noneEnded()
	}
	return v.main, nil
}

func (v *storeView) noneEnded() error {
	return fmt.Errorf("no session has ended in %s yet (its event store is made when the first one ends): %w", v.data, store.ErrNotFound)
}
