package storeflags

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store"
)

// Flags are the store's limits and its commit linger.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "max-session-bytes", Value: "1GiB",
			Usage: "the most the session may store (`SIZE`, e.g. 512MiB; off: no limit); past it new flows are refused"},
		&cli.StringFlag{Name: "min-free-disk", Value: "256MiB",
			Usage: "free space kept on the store's disk (`SIZE`; off: not watched); below it new flows are refused, below a quarter of it events are counted, not written"},
		&cli.DurationFlag{Name: "commit-linger", Value: store.DefaultCommitLinger,
			Usage: "how long the store waits for more events before it syncs a batch (`DURATION`; 0: sync each batch at once); a crash loses at most this much of the record"},
	}
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
