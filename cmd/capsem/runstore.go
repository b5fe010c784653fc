package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/storeflags"
	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
)

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

// openStoreForReading opens the main store of --data read-only, after
// moving the sessions of finished runs into it, and says how many sessions
// are still elsewhere (runs and sandboxes going on, or not yet moved).
func openStoreForReading(c *cli.Context) (*store.Store, int, error) {
	data := c.String("data")
	pending, err := sessionstore.Merge(data, 2*time.Second)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "capsem: warning: %v\n", err)
	}
	st, err := sessionstore.OpenReadOnlyWait(data, 2*time.Second)
	return st, pending, err
}
