package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/loglevel"
	"github.com/capsem/capsem/sandbox/supervisor"
)

// The supervisor of a running sandbox is the capsem binary in another mode
// (`capsem supervise`, started by `capsem start` detached in a session of
// its own, or run in place by `capsem start --foreground`); what it does is
// sandbox/supervisor's.

func superviseCommand() *cli.Command {
	return &cli.Command{
		Name:      "supervise",
		Usage:     "run a sandbox's supervisor (capsem start runs this; use capsem start --foreground)",
		UsageText: "capsem supervise [--data DIR] NAME",
		Hidden:    true,
		Flags: append([]cli.Flag{dataFlag(), logLevelFlag(), caDirFlag(),
			&cli.BoolFlag{Name: "cold", Usage: "boot, discarding a suspended guest"}}, storeFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError{errors.New("want one sandbox NAME")}
			}
			opts, err := superviseOptionsFrom(c)
			if err != nil {
				return err
			}
			return supervisor.Run(c.Context, c.String("data"), c.Args().First(), opts, supervisor.ReporterFromEnv())
		},
	}
}

func logLevelFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "the supervisor's log: debug, info, warn, error"}
}

// superviseOptionsFrom is what a supervisor takes from its flags.
func superviseOptionsFrom(c *cli.Context) (supervisor.Options, error) {
	o := supervisor.Options{CADir: c.String("ca-dir"), Host: hostName(), Cold: c.Bool("cold")}
	var err error
	if o.Store, err = storeOptions(c); err != nil {
		return o, err
	}
	if o.Audit, err = auditOptions(c); err != nil {
		return o, err
	}
	if o.Log, err = loglevel.Logger(c.App.ErrWriter, c.String("log-level")); err != nil {
		return o, usageError{err}
	}
	return o, nil
}
