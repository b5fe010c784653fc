package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write sessions of the event store to a SQLite file",
		UsageText: "capsem export --sqlite OUT.db [--data DIR] [--session ID | --all] [--scrub] [--force]",
		Description: "Without --session or --all, the newest session is exported. --scrub replaces API keys,\n" +
			"tokens, credential headers and private keys with [REDACTED:<kind>], for sharing and fixtures.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sqlite", Usage: "the SQLite `FILE` to write (required)"},
			&cli.StringFlag{Name: "data", Value: store.DefaultDir(), Usage: "event store `DIR`"},
			&cli.StringSliceFlag{Name: "session", Usage: "export session `ID` (repeatable)"},
			&cli.BoolFlag{Name: "all", Usage: "export every session"},
			&cli.BoolFlag{Name: "scrub", Usage: "redact secrets in every text column"},
			&cli.BoolFlag{Name: "force", Usage: "replace FILE if it exists"},
		},
		OnUsageError: onUsageError,
		Action:       runExport,
	}
}

func runExport(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", c.Args().First())}
	}
	if c.String("sqlite") == "" {
		return usageError{errors.New("--sqlite FILE is required: where to write the export")}
	}
	ids := c.StringSlice("session")
	if len(ids) > 0 && c.Bool("all") {
		return usageError{errors.New("give --session or --all, not both")}
	}
	v, err := openStoreView(c)
	if err != nil {
		return err
	}
	defer v.Close()
	if len(ids) == 0 && !c.Bool("all") {
		sessions, err := v.Sessions()
		if err != nil {
			return err
		}
		if len(sessions) == 0 {
			return fmt.Errorf("no sessions in %s", c.String("data"))
		}
		ids = []string{sessions[0].ID}
	}
	st, err := v.Finished() // --all: the finished sessions
	if len(ids) == 0 && err != nil {
		return err
	}
	if len(ids) == 0 && v.LiveCount() > 0 {
		fmt.Fprintf(c.App.ErrWriter, "capsem: --all exports the finished sessions; %d running sandbox session(s) are exported on their own, with --session ID\n", v.LiveCount())
	}
	if len(ids) > 0 {
		if st, err = v.StoreOf(ids); err != nil {
			return err
		}
	}
	res, err := sqliteexport.Export(context.Background(), st, c.String("sqlite"), sqliteexport.Options{
		Sessions:  ids,
		Scrub:     c.Bool("scrub"),
		Overwrite: c.Bool("force"),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "exported %d session(s), %d events (%d net, %d dns, %d model calls with %d tool calls and %d tool responses, %d mcp calls (%d linked to a tool call), %d exec, %d fs, %d agent) to %s in %s\n",
		res.Sessions, res.Events, res.NetEvents, res.DNSEvents, res.ModelCalls, res.ToolCalls, res.ToolResponses,
		res.MCPCalls, res.MCPLinks, res.ExecEvents, res.FSEvents, res.AgentEvents, display(c.String("sqlite")), res.Duration.Round(1e6))
	return nil
}
