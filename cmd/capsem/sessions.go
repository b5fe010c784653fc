package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/sandbox/storeview"
	"github.com/capsem/capsem/store"
)

func dataFlag() cli.Flag {
	return &cli.StringFlag{Name: "data", Value: store.DefaultDir(), Usage: "event store `DIR`"}
}

// openStoreView is the sessions of --data for capsem sessions, inspect and
// export: the main store held until Close, the running sessions'
// snapshots taken once; what is left out is told on stderr.
func openStoreView(c *cli.Context) (*storeview.View, error) {
	return storeview.Open(c.String("data"), storeview.Options{Warn: func(msg string) {
		fmt.Fprintf(c.App.ErrWriter, "capsem: %s\n", msg)
	}})
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
	ID        string     `json:"id"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	// Crashed: the session has no end. `capsem sessions` reads the main
	// store only when no process holds it, and a run's session enters it
	// only once the run is over, so a session without an end there is one
	// whose process died (SIGKILL, a crash) before recording it; its events
	// up to the last synced batch are there.
	Crashed bool `json:"crashed"`
	// Running: the session of a running sandbox, read from a snapshot of
	// its supervisor's store; it has no end yet.
	Running    bool     `json:"running"`
	Sandbox    string   `json:"sandbox,omitempty"` // the long-lived sandbox it is a start of
	DurationMS *int64   `json:"duration_ms"`
	Command    []string `json:"command"`
	ExitCode   *int     `json:"exit_code"`
	Events     int64    `json:"events"`
	Allowed    int64    `json:"allowed"`
	Denied     int64    `json:"denied"`
	Lost       int64    `json:"lost"`
	// The sums of the session's model calls (zero for sessions recorded
	// before the store kept them).
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// What the host saw of the guest agent (store.Agent events): it went
	// silent, was cut off for a protocol violation, had reports dropped by
	// the rate limit or fields truncated. A session with no guest agent
	// (capsem-net) has none of these.
	AgentSilent  bool             `json:"agent_silent"`           // stopped answering pings at least once
	AgentCutOff  bool             `json:"agent_cut_off"`          // cut off by the host: the record ends there
	AgentDropped int64            `json:"agent_events_dropped"`   // guest-reported events the rate limit dropped
	Agent        map[string]int64 `json:"agent_states,omitempty"` // agent events per state, weighted by count
}

func summarize(s store.Session) sessionSummary {
	out := sessionSummary{
		ID: s.ID, StartedAt: s.StartedAt, Command: s.Command, ExitCode: s.ExitCode, Sandbox: s.Sandbox,
		Events: s.Counts.Events, Allowed: s.Counts.Allowed, Denied: s.Counts.Denied, Lost: s.Counts.Lost,
		InputTokens: s.Counts.InputTokens, OutputTokens: s.Counts.OutputTokens, CostUSD: s.Counts.CostUSD,
		AgentSilent:  s.Counts.Agent[store.AgentSilent] > 0,
		AgentCutOff:  s.Counts.Agent[store.AgentViolation] > 0,
		AgentDropped: s.Counts.Agent[store.AgentRateLimited],
		Agent:        s.Counts.Agent,
	}
	if !s.EndedAt.IsZero() {
		end := s.EndedAt
		d := end.Sub(s.StartedAt).Milliseconds()
		out.EndedAt, out.DurationMS = &end, &d
	} else {
		out.Crashed = true
	}
	return out
}

func runSessions(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", c.Args().First())}
	}
	v, err := openStoreView(c)
	if err != nil {
		return err
	}
	defer v.Close()
	sessions, err := v.Sessions()
	if err != nil {
		return err
	}
	sums := make([]sessionSummary, 0, len(sessions))
	for _, s := range sessions {
		sum := summarize(s)
		if v.Live(s.ID) {
			sum.Crashed, sum.Running = false, true
		}
		sums = append(sums, sum)
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, sums)
	}
	if len(sums) == 0 {
		fmt.Fprintf(c.App.Writer, "no sessions in %s\n", display(c.String("data")))
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tDURATION\tEXIT\tALLOWED\tDENIED\tAGENT\tCOMMAND")
	for _, s := range sums {
		dur, exit := "crashed (no end)", "-"
		if s.Running {
			dur = "running"
		}
		if s.DurationMS != nil {
			dur = (time.Duration(*s.DurationMS) * time.Millisecond).String()
		}
		if s.ExitCode != nil {
			exit = fmt.Sprint(*s.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", display(s.ID), s.StartedAt.Local().Format("2006-01-02 15:04:05"),
			dur, exit, s.Allowed, s.Denied, s.agentNote(), shorten(display(strings.Join(s.Command, " ")), 60))
	}
	return tw.Flush()
}

// agentNote says in a few words what went wrong with the guest agent, or
// "-": "cut off" (the host ended it for a protocol violation), "silent"
// (it stopped answering and never came back) or "was silent", then how
// many reports were dropped or truncated. Whatever it says, the record
// of the guest's own reports (fs events) is incomplete.
func (s sessionSummary) agentNote() string {
	var notes []string
	if s.AgentCutOff {
		notes = append(notes, "cut off")
	}
	if n := s.Agent[store.AgentSilent]; n > 0 {
		if n > s.Agent[store.AgentResumed] {
			notes = append(notes, "silent")
		} else {
			notes = append(notes, "was silent")
		}
	}
	if s.AgentDropped > 0 {
		notes = append(notes, fmt.Sprintf("%d dropped", s.AgentDropped))
	}
	if n := s.Agent[store.AgentCapped]; n > 0 {
		notes = append(notes, fmt.Sprintf("%d capped", n))
	}
	if len(notes) == 0 {
		return "-"
	}
	return strings.Join(notes, ", ")
}

// shorten cuts s to n runes, the last an ellipsis when it had more.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
