package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/storeflags"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/store"
)

// Each `capsem run` writes its events to a store of its own, in the
// session's directory under the data directory:
//
//	<data>/sessions/<id>/events/      the run's event store, while it runs
//	<data>/sessions/<id>/console.log  the guest's serial console
//
// so that any number of runs can go at once (a store has one writer). When
// a run ends its session is moved into the main store at <data>, where
// `capsem sessions`, `export` and `inspect` find it; a run that could not
// be moved (the main store was busy, capsem was killed) is moved by the
// next command that opens the main store.

// runStore is one run's private store and its session writer.
type runStore struct {
	data string
	st   *store.Store
	w    *store.Writer
}

// storeFlags are the event store's flags, as capsem-net has them.
func storeFlags() []cli.Flag { return storeflags.Flags() }

// storeOptions reads the flags of storeFlags.
func storeOptions(c *cli.Context) (store.Options, error) {
	o, err := storeflags.Options(c)
	if err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// openRunStoreWith opens the run's own store with the limits opt (see
// storeOptions) and begins its session.
func openRunStoreWith(data string, meta store.Session, opt store.Options) (*runStore, error) {
	meta.ID = store.NewSessionID()
	dir := home.SessionDir(data, meta.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	st, err := store.OpenWith(home.SessionEventsDir(data, meta.ID), opt)
	if err != nil {
		return nil, err
	}
	w, err := st.Begin(meta)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &runStore{data: data, st: st, w: w}, nil
}

// snapshot answers POST /v1/snapshot for a running sandbox's supervisor
// and a running capsem run alike: a checkpoint of the store (hard links)
// in a new directory under dir, taken after a sync so that every event
// appended so far is in it (the store commits in groups: without the sync
// the supervisor's missed the newest). The reader opens it read-only and
// removes it.
func (r *runStore) snapshot(dir string) (api.Snapshot, error) {
	if err := r.w.Sync(); err != nil {
		return api.Snapshot{}, fmt.Errorf("the store could not sync: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return api.Snapshot{}, err
	}
	snap := filepath.Join(dir, fmt.Sprintf("%d", time.Now().UnixNano()))
	if err := r.st.Checkpoint(snap); err != nil {
		return api.Snapshot{}, fmt.Errorf("checkpoint of the store: %w", err)
	}
	return api.Snapshot{Dir: snap, SessionID: r.w.ID()}, nil
}

// end records the exit code, flushes every event and closes the store.
func (r *runStore) end(code *int) error {
	return errors.Join(r.w.End(code), r.st.Close())
}

// mergeRuns moves every finished run's session into the main store at data,
// waiting up to wait for the main store when another process holds it. It
// returns how many sessions are still waiting to be moved.
func mergeRuns(data string, wait time.Duration) (pending int, err error) {
	dirs, _ := filepath.Glob(home.SessionEventsGlob(data))
	if len(dirs) == 0 {
		return 0, nil
	}
	main, err := openMainStore(data, wait)
	if err != nil {
		return len(dirs), err
	}
	defer main.Close()
	var errs []error
	for _, dir := range dirs {
		id := filepath.Base(filepath.Dir(dir))
		src, err := store.OpenReadOnly(dir)
		if errors.Is(err, store.ErrInUse) {
			pending++ // still running
			continue
		}
		if err != nil {
			pending++
			errs = append(errs, fmt.Errorf("session %s: %w", id, err))
			continue
		}
		err = main.Import(src, id)
		src.Close()
		if err != nil {
			pending++
			errs = append(errs, fmt.Errorf("move session %s into %s: %w", id, data, err))
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return pending, errors.Join(errs...)
}

// openMainStore opens the store at data for writing, retrying while
// another process holds it, for up to wait.
func openMainStore(data string, wait time.Duration) (*store.Store, error) {
	return whileInUse(wait, func() (*store.Store, error) { return store.Open(data) })
}

// whileInUse calls open until it does not fail with store.ErrInUse, for up
// to wait: another capsem holds a store for moments at a time.
func whileInUse(wait time.Duration, open func() (*store.Store, error)) (*store.Store, error) {
	deadline := time.Now().Add(wait)
	for {
		st, err := open()
		if err == nil || !errors.Is(err, store.ErrInUse) || time.Now().After(deadline) {
			return st, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openStoreForReading opens the main store of --data read-only, after
// moving the sessions of finished runs into it, and says how many sessions
// are still elsewhere (runs and sandboxes going on, or not yet moved).
func openStoreForReading(c *cli.Context) (*store.Store, int, error) {
	data := c.String("data")
	pending, err := mergeRuns(data, 2*time.Second)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "capsem: warning: %v\n", err)
	}
	st, err := openReadOnlyWait(data, 2*time.Second)
	return st, pending, err
}

// openReadOnlyWait opens the store at data read-only, retrying while
// another process holds it (a run moving its session in, capsem ui
// reading it) for up to wait.
func openReadOnlyWait(data string, wait time.Duration) (*store.Store, error) {
	return whileInUse(wait, func() (*store.Store, error) { return store.OpenReadOnly(data) })
}
