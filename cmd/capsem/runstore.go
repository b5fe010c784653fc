package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/storeflags"
	"github.com/capsem/capsem/sandbox/storeview"
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

// openStoreView is the sessions of --data for capsem sessions, inspect and
// export: the main store held until Close, the running sessions'
// snapshots taken once; what is left out is told on stderr.
func openStoreView(c *cli.Context) (*storeview.View, error) {
	return storeview.Open(c.String("data"), storeview.Options{Warn: func(msg string) {
		fmt.Fprintf(c.App.ErrWriter, "capsem: %s\n", msg)
	}})
}
