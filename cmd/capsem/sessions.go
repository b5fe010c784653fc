package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store"
)

func dataFlag() cli.Flag {
	return &cli.StringFlag{Name: "data", Value: store.DefaultDir(), Usage: "event store `DIR`"}
}

func sessionsCommand() *cli.Command {
	return &cli.Command{
		Name:         "sessions",
		Usage:        "list the sessions in the event store, newest first",
		UsageText:    "capsem sessions [--data DIR] [--json]",
		Flags:        []cli.Flag{dataFlag(), &cli.BoolFlag{Name: "json", Usage: "one JSON array instead of a table"}},
		OnUsageError: onUsageError,
		Action:       runSessions,
	}
}

// sessionSummary is one line of `capsem sessions`, and its JSON form.
type sessionSummary struct {
	ID         string     `json:"id"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at"`
	DurationMS *int64     `json:"duration_ms"`
	Command    []string   `json:"command"`
	ExitCode   *int       `json:"exit_code"`
	Events     int64      `json:"events"`
	Allowed    int64      `json:"allowed"`
	Denied     int64      `json:"denied"`
	Lost       int64      `json:"lost"`
}

func summarize(s store.Session) sessionSummary {
	out := sessionSummary{
		ID: s.ID, StartedAt: s.StartedAt, Command: s.Command, ExitCode: s.ExitCode,
		Events: s.Counts.Events, Allowed: s.Counts.Allowed, Denied: s.Counts.Denied, Lost: s.Counts.Lost,
	}
	if !s.EndedAt.IsZero() {
		end := s.EndedAt
		d := end.Sub(s.StartedAt).Milliseconds()
		out.EndedAt, out.DurationMS = &end, &d
	}
	return out
}

func runSessions(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", c.Args().First())}
	}
	st, err := openStoreForReading(c)
	if err != nil {
		return err
	}
	defer st.Close()
	sessions, err := st.Sessions()
	if err != nil {
		return err
	}
	sums := make([]sessionSummary, 0, len(sessions))
	for _, s := range sessions {
		sums = append(sums, summarize(s))
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(sums)
	}
	if len(sums) == 0 {
		fmt.Fprintf(c.App.Writer, "no sessions in %s\n", c.String("data"))
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tDURATION\tEXIT\tALLOWED\tDENIED\tCOMMAND")
	for _, s := range sums {
		dur, exit := "running or crashed", "-"
		if s.DurationMS != nil {
			dur = (time.Duration(*s.DurationMS) * time.Millisecond).String()
		}
		if s.ExitCode != nil {
			exit = fmt.Sprint(*s.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", s.ID, s.StartedAt.Local().Format("2006-01-02 15:04:05"),
			dur, exit, s.Allowed, s.Denied, shorten(strings.Join(s.Command, " "), 60))
	}
	return tw.Flush()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
