package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/store"
)

// storeView is what capsem sessions, inspect and export read: the main
// store, and the session of each running sandbox, seen through a snapshot
// its supervisor writes on request (POST /v1/snapshot: a pebble checkpoint,
// hard links to the live store's files, opened read-only here and removed
// after). A running sandbox's session is not in the main store until it
// stops, and its store is held by its supervisor.
type storeView struct {
	main *store.Store
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
// finished sessions into it, and snapshots the running sandboxes'
// sessions.
func openStoreView(c *cli.Context) (*storeView, error) {
	main, pending, err := openStoreForReading(c)
	if err != nil {
		return nil, err
	}
	v := &storeView{main: main}
	dirs, _ := listSandboxes(c.String("data"))
	for _, d := range dirs {
		if !d.locked() {
			continue
		}
		client := api.NewClient(d.socketPath())
		ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
		snap, err := client.Snapshot(ctx)
		cancel()
		client.Close()
		if err != nil {
			fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s's running session is not included: %v\n", d.Name, err)
			continue
		}
		st, err := store.OpenReadOnly(snap.Dir)
		if err != nil {
			os.RemoveAll(snap.Dir)
			fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s's running session is not included: %v\n", d.Name, err)
			continue
		}
		v.live = append(v.live, liveStore{sandbox: d.Name, session: snap.SessionID, dir: snap.Dir, st: st})
	}
	if n := pending - len(v.live); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "capsem: %d session(s) still running (capsem run) or not yet moved into %s are not included\n", n, c.String("data"))
	}
	return v, nil
}

func (v *storeView) Close() {
	v.main.Close()
	for _, l := range v.live {
		l.st.Close()
		os.RemoveAll(l.dir)
	}
}

// Sessions is every session, newest first, and which of them are running.
func (v *storeView) Sessions() ([]store.Session, map[string]bool, error) {
	all, err := v.main.Sessions()
	if err != nil {
		return nil, nil, err
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
		if _, err := st.Session(id); err != nil {
			return nil, err
		}
		if found != nil && found != st {
			return nil, errors.New("these sessions are in different stores (a running sandbox's session is read apart): export each running session on its own, --session ID")
		}
		found = st
	}
	if found == nil {
		return v.main, nil
	}
	return found, nil
}
