package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/ocsf"
	"github.com/capsem/capsem/store/sqliteexport"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write sessions of the event store to a SQLite file, or as OCSF events",
		UsageText: "capsem export --sqlite OUT.db [--data DIR] [--session ID | --all] [--scrub] [--force]\n   capsem export --format ocsf [--out FILE] [--data DIR] [--session ID | --all] [--scrub]",
		Description: "Without --session or --all, the newest session is exported. --scrub replaces API keys,\n" +
			"tokens, credential headers and private keys with [REDACTED:<kind>], for sharing and fixtures.\n\n" +
			"--format ocsf writes OCSF " + ocsf.Version + " events, one JSON object a line, to standard output or --out:\n" +
			"DNS, Network, HTTP, Process and File System Activity (what has no OCSF attribute is under\n" +
			"unmapped.capsem; agent and recording events have no class there and are counted, not written).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sqlite", Usage: "the SQLite `FILE` to write (with --format sqlite, the default)"},
			&cli.StringFlag{Name: "format", Value: "sqlite", Usage: "`FORMAT`: sqlite, or ocsf (JSON lines)"},
			&cli.StringFlag{Name: "out", Usage: "--format ocsf: write to `FILE` instead of standard output"},
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
	format := c.String("format")
	switch {
	case format != "sqlite" && format != "ocsf":
		return usageError{fmt.Errorf("--format %q: write sqlite or ocsf", format)}
	case format == "ocsf" && c.String("sqlite") != "":
		return usageError{errors.New("--sqlite is the SQLite export's file; --format ocsf writes to --out or standard output")}
	case format == "sqlite" && c.String("out") != "":
		return usageError{errors.New("--out is for --format ocsf; the SQLite export's file is --sqlite FILE")}
	case format == "sqlite" && c.String("sqlite") == "":
		return usageError{errors.New("--sqlite FILE is required: where to write the export (or --format ocsf)")}
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
	if format == "ocsf" {
		return exportOCSF(c, st, ids)
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

// exportOCSF writes the sessions ids of st (none: every session of st)
// as OCSF events to --out or standard output, and says what it wrote on
// standard error (standard output may be the events).
func exportOCSF(c *cli.Context, st *store.Store, ids []string) error {
	var sessions []store.Session
	if len(ids) == 0 {
		var err error
		if sessions, err = st.Sessions(); err != nil {
			return err
		}
		slices.Reverse(sessions) // oldest first, as events are
	}
	for _, id := range ids {
		s, err := st.Session(id)
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	w := c.App.Writer
	out := c.String("out")
	var f *os.File
	if out != "" {
		var err error
		if f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	start := time.Now()
	res, err := ocsf.Write(w, st, sessions, ocsf.Options{Scrub: c.Bool("scrub")})
	if err != nil {
		return err
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return err
		}
	}
	classes := make([]string, 0, len(res.ByClass))
	for _, k := range slices.Sorted(maps.Keys(res.ByClass)) {
		classes = append(classes, fmt.Sprintf("%d %s", res.ByClass[k], k))
	}
	note := ""
	if n := len(res.Skipped); n > 0 {
		var sk []string
		for _, k := range slices.Sorted(maps.Keys(res.Skipped)) {
			sk = append(sk, fmt.Sprintf("%d %s", res.Skipped[k], k))
		}
		note = "; not written, no OCSF class here: " + strings.Join(sk, ", ") + " (they are in the SQLite export)"
	}
	where := "standard output"
	if out != "" {
		where = display(out)
	}
	fmt.Fprintf(c.App.ErrWriter, "capsem: exported %d session(s) as %d OCSF %s events (%s) to %s in %s%s\n",
		len(sessions), res.Events, ocsf.Version, strings.Join(classes, ", "), where, time.Since(start).Round(time.Millisecond), note)
	return nil
}
