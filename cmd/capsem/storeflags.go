package main

import (
	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/storeflags"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp"
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

// auditOptions reads the audit flags of storeFlags.
func auditOptions(c *cli.Context) (otlp.Config, error) {
	cfg, err := storeflags.Audit(c)
	if err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}
