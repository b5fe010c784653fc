package storeflags

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp"
)

// Flags are the store's limits and its commit linger, and the audit
// stream of its events.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "audit-otlp", Usage: "stream every event of the session to the OpenTelemetry collector at `URL` (OTLP/HTTP, e.g. http://collector:4318) as log records; events wait in the store while it is down"},
		&cli.BoolFlag{Name: "audit-required", Usage: "with --audit-otlp: refuse new flows and requests while the stream is more than --audit-backlog events behind (fail closed, as for a full store)"},
		&cli.Uint64Flag{Name: "audit-backlog", Value: otlp.DefaultBacklog, Usage: "with --audit-otlp: `EVENTS` the stream may fall behind before that is an event (audit-behind) and, --audit-required, a refusal"},
		&cli.StringFlag{Name: "max-session-bytes", Value: "1GiB",
			Usage: "the most the session may store (`SIZE`, e.g. 512MiB; off: no limit); past it new flows are refused"},
		&cli.StringFlag{Name: "min-free-disk", Value: "256MiB",
			Usage: "free space kept on the store's disk (`SIZE`; off: not watched); below it new flows are refused, below a quarter of it events are counted, not written"},
		&cli.DurationFlag{Name: "commit-linger", Value: store.DefaultCommitLinger,
			Usage: "how long the store waits for more events before it syncs a batch (`DURATION`; 0: sync each batch at once); a crash loses at most this much of the record"},
	}
}

// Audit reads the audit flags of Flags: the shipper's configuration, with
// URL "" when the session is not streamed. The caller adds the resource.
func Audit(c *cli.Context) (otlp.Config, error) {
	cfg := otlp.Config{URL: c.String("audit-otlp"), Required: c.Bool("audit-required"), Backlog: c.Uint64("audit-backlog")}
	switch {
	case cfg.URL == "" && cfg.Required:
		return cfg, fmt.Errorf("--audit-required needs --audit-otlp URL: the collector the session must stream to")
	case cfg.Backlog == 0:
		return cfg, fmt.Errorf("--audit-backlog 0: give how many events the stream may fall behind (default %d)", otlp.DefaultBacklog)
	}
	return cfg, nil
}

// Options reads the flags of Flags. Its errors name the flag; the caller
// makes them usage errors.
func Options(c *cli.Context) (store.Options, error) {
	var o store.Options
	var err error
	if o.MaxSessionBytes, err = store.ParseSize(c.String("max-session-bytes")); err != nil {
		return o, fmt.Errorf("--max-session-bytes: %w", err)
	}
	if o.MinFreeDisk, err = store.ParseSize(c.String("min-free-disk")); err != nil {
		return o, fmt.Errorf("--min-free-disk: %w", err)
	}
	switch l := c.Duration("commit-linger"); {
	case l < 0:
		return o, fmt.Errorf("--commit-linger %v: want 0 (no linger) or a positive duration", l)
	case l == 0:
		o.CommitLinger = -1 // store.Options: negative is none, zero the default
	case l > time.Second:
		return o, fmt.Errorf("--commit-linger %v: at most 1s (a crash loses up to this much of the record)", l)
	default:
		o.CommitLinger = l
	}
	return o, nil
}

// Pass is the flags of Flags as c has them, for a process started with
// the same (capsem start's supervisor).
func Pass(c *cli.Context) []string {
	args := []string{"--max-session-bytes", c.String("max-session-bytes"), "--min-free-disk", c.String("min-free-disk"),
		"--commit-linger", c.Duration("commit-linger").String(), "--audit-backlog", fmt.Sprint(c.Uint64("audit-backlog"))}
	if u := c.String("audit-otlp"); u != "" {
		args = append(args, "--audit-otlp", u)
	}
	if c.Bool("audit-required") {
		args = append(args, "--audit-required")
	}
	return args
}
