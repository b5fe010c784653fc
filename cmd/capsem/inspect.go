package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store/sqliteexport"
	"github.com/capsem/capsem/store/sqliteexport/inspect"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "summarise one session and check its integrity (exit 1 when a check fails)",
		UsageText: "capsem inspect [ID] [--data DIR] [--json] [-n ROWS] [--key FILE] [--require-chain]\n   capsem inspect --sqlite FILE [ID] [--json] [-n ROWS] [--key FILE] [--require-chain]",
		Description: "Without ID, the newest session. The session is exported (scrubbed) to a temporary SQLite\n" +
			"file and summarised from it: rows per table, the first rows of each, denied flows, top domains,\n" +
			"and the integrity checks. --sqlite reads a file capsem export wrote instead of the store.\n\n" +
			"The hash chain check verifies every event against its predecessor's hash and the session's\n" +
			"sealed head, and names the first row that does not match; the seal must be this installation's\n" +
			"key (capsem ca seal-key) or one given with --key.",
		Flags: append([]cli.Flag{
			dataFlag(),
			&cli.StringFlag{Name: "sqlite", Usage: "inspect a session of `FILE`, a capsem export, instead of the store"},
			&cli.BoolFlag{Name: "json", Usage: "the report as JSON"},
			&cli.IntFlag{Name: "n", Value: 5, Usage: "`ROWS` to show per list"},
		}, inspectChainFlags()...),
		OnUsageError: onUsageError,
		Action:       runInspect,
	}
}

// report is capsem inspect's report: the session and what inspect.Build
// found (its fields, flattened, follow "session" in the JSON).
type report struct {
	Session sessionSummary `json:"session"`
	inspect.Report
}

// buildReport is the report of the session sess in db, n rows per list.
func buildReport(db sqliteexport.Querier, sess sessionSummary, n int) (report, error) {
	r, err := inspect.Build(db, n)
	return report{Session: sess, Report: r}, err
}

func runInspect(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageError{fmt.Errorf("unexpected argument %q", c.Args().Get(1))}
	}
	n := c.Int("n")
	if n < 0 {
		return usageError{errors.New("-n must not be negative")}
	}
	id := c.Args().First()
	if file := c.String("sqlite"); file != "" {
		return inspectSQLite(c, file, id, n)
	}
	v, err := openStoreView(c)
	if err != nil {
		return err
	}
	defer v.Close()
	if id == "" {
		sessions, err := v.Sessions()
		if err != nil {
			return err
		}
		if len(sessions) == 0 {
			return fmt.Errorf("no sessions in %s", c.String("data"))
		}
		id = sessions[0].ID
	}
	st, err := v.StoreOf([]string{id})
	if err != nil {
		return err
	}
	sess, err := st.Session(id)
	if err != nil {
		return err
	}
	// The chain is checked on the store, whose values the export below
	// (scrubbed) leaves out.
	cst, verr := st.VerifyChain(id)
	chain, err := chainCheck(c, cst, false, verr)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "capsem-inspect")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dbPath := filepath.Join(tmp, "session.db")
	if _, err := sqliteexport.Export(context.Background(), st, dbPath, sqliteexport.Options{Sessions: []string{id}, Scrub: true}); err != nil {
		return err
	}
	// Read as any export is, --sqlite's or capsem ui's: one opener, one
	// set of checks.
	r, err := sqliteexport.OpenReader(dbPath)
	if err != nil {
		return err
	}
	defer r.Close()
	return reportAndCheck(c, r, summarize(sess), n, chain)
}

// reportAndCheck prints the report of the session sess in db, with the
// checks extra made elsewhere, and fails when one of them does.
func reportAndCheck(c *cli.Context, db sqliteexport.Querier, sess sessionSummary, n int, extra ...inspect.Check) error {
	id := sess.ID
	r, err := buildReport(db, sess, n)
	if err != nil {
		return err
	}
	r.Checks = append(r.Checks, extra...)
	if c.Bool("json") {
		if err := writeJSON(c.App.Writer, r); err != nil {
			return err
		}
	} else {
		printReport(c, r)
	}
	// A failed check is an ordinary error (exit 1 from run), not cli.Exit,
	// which would make urfave/cli call os.Exit itself.
	var failed []string
	for _, ch := range r.Checks {
		if !ch.OK {
			failed = append(failed, ch.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("session %s: %d of %d checks failed: %s", display(id), len(failed), len(r.Checks), strings.Join(failed, "; "))
	}
	return nil
}

func printReport(c *cli.Context, r report) {
	w := c.App.Writer
	s := r.Session
	fmt.Fprintf(w, "session %s  started %s  command \"%s\"\n", display(s.ID), s.StartedAt.Local().Format("2006-01-02 15:04:05"), display(strings.Join(s.Command, " ")))
	fmt.Fprintf(w, "events %d  allowed %d  denied %d  lost %d  agent %s\n\n", s.Events, s.Allowed, s.Denied, s.Lost, s.agentNote())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tROWS")
	for _, t := range inspect.Tables {
		if n, ok := r.Rows[t]; ok {
			fmt.Fprintf(tw, "%s\t%d\n", t, n)
		}
	}
	tw.Flush()
	section := func(title string, ls []string) {
		if len(ls) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range ls {
			fmt.Fprintln(w, "  "+display(l))
		}
	}
	for _, t := range []string{"recording_events", "agent_events", "dns_events", "net_events", "model_calls", "tool_calls", "tool_responses"} {
		section("first "+t, r.Preview[t])
	}
	section("denied flows", r.Denied)
	section("top domains", r.TopDomain)
	fmt.Fprintln(w, "\nchecks:")
	for _, ch := range r.Checks {
		mark := "ok  "
		if !ch.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s %s\n", mark, ch.Name, display(ch.Detail))
	}
}
