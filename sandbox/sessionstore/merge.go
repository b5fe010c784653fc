package sessionstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/store"
)

// Merge moves every finished session's own store into the main store at
// data, waiting up to wait for the main store when another process holds
// it (0: one try). It returns how many sessions are still waiting to be
// moved: those still recorded, and those that failed.
func Merge(data string, wait time.Duration) (pending int, err error) {
	dirs, _ := filepath.Glob(home.SessionEventsGlob(data))
	if len(dirs) == 0 {
		return 0, nil
	}
	main, err := OpenMain(data, wait)
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

// OpenMain opens the main store at data for writing, retrying while
// another process holds it, for up to wait.
func OpenMain(data string, wait time.Duration) (*store.Store, error) {
	return whileInUse(wait, func() (*store.Store, error) { return store.Open(data) })
}

// OpenReadOnlyWait opens the main store at data read-only, retrying while
// another process holds it (a run moving its session in, capsem ui
// reading it) for up to wait.
func OpenReadOnlyWait(data string, wait time.Duration) (*store.Store, error) {
	return whileInUse(wait, func() (*store.Store, error) { return store.OpenReadOnly(data) })
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
