package main

import (
	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/storeflags"
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
