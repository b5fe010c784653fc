package main

import (
	"errors"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store"
)

// TestStoreOptions: the store's limit flags read sizes as users write them,
// default to the store's defaults, and refuse nonsense as a usage error.
func TestStoreOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want store.Options
		bad  bool
		why  string
	}{
		{nil, store.Options{MaxSessionBytes: store.DefaultMaxSessionBytes, MinFreeDisk: store.DefaultMinFreeDisk, CommitLinger: store.DefaultCommitLinger}, false, "the flags' defaults are the store's"},
		{[]string{"--max-session-bytes", "512MiB", "--min-free-disk", "1G"}, store.Options{MaxSessionBytes: 512 << 20, MinFreeDisk: 1 << 30, CommitLinger: store.DefaultCommitLinger}, false, ""},
		{[]string{"--max-session-bytes", "off", "--min-free-disk", "off"}, store.Options{MaxSessionBytes: -1, MinFreeDisk: -1, CommitLinger: store.DefaultCommitLinger}, false, "off: no limit, no watch"},
		{[]string{"--commit-linger", "0"}, store.Options{MaxSessionBytes: store.DefaultMaxSessionBytes, MinFreeDisk: store.DefaultMinFreeDisk, CommitLinger: -1}, false, "0: no linger, as the store's negative"},
		{[]string{"--commit-linger", "5ms"}, store.Options{MaxSessionBytes: store.DefaultMaxSessionBytes, MinFreeDisk: store.DefaultMinFreeDisk, CommitLinger: 5 * time.Millisecond}, false, ""},
		{[]string{"--commit-linger", "-1ms"}, store.Options{}, true, "negative"},
		{[]string{"--commit-linger", "2s"}, store.Options{}, true, "past a second a crash loses too much"},
		{[]string{"--max-session-bytes", "lots"}, store.Options{}, true, "not a size"},
		{[]string{"--min-free-disk", "1.5G"}, store.Options{}, true, "no fractions"},
	} {
		var got store.Options
		var err error
		app := &cli.App{Flags: storeFlags(), Action: func(c *cli.Context) error {
			got, err = storeOptions(c)
			return nil
		}}
		if rerr := app.Run(append([]string{"capsem"}, c.args...)); rerr != nil {
			t.Fatal(rerr)
		}
		var ue usageError
		if c.bad != (err != nil) || (err != nil && !errors.As(err, &ue)) || (!c.bad && (got.MaxSessionBytes != c.want.MaxSessionBytes || got.MinFreeDisk != c.want.MinFreeDisk || got.CommitLinger != c.want.CommitLinger)) {
			t.Errorf("%v: %+v, %v; want %+v (usage error: %v): %s", c.args, got, err, c.want, c.bad, c.why)
		}
	}
}
