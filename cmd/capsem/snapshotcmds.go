package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/sandbox/supervisor"
	"github.com/capsem/capsem/store"
)

// The snapshot commands: snapshot, snapshot rm, snapshots, suspend. A
// snapshot is taken by the running sandbox's supervisor (through its API);
// listing and removing read the sandbox's directory, running or not.

func snapshotCommand() *cli.Command {
	return &cli.Command{
		Name:      "snapshot",
		Usage:     "save a running sandbox's guest — memory, processes, devices and disk at one instant — and let it go on",
		UsageText: "capsem snapshot [--data DIR] [--tag TAG] NAME\n   capsem snapshot rm [--data DIR] NAME TAG",
		Description: "The guest pauses while its memory and disk are copied (a few hundred ms for the memory a busy\n" +
			"agent touches), then goes on; its commands keep running. The snapshot lives in\n" +
			"sandboxes/NAME/snapshots/TAG/ until capsem snapshot rm or capsem rm. capsem start --from NAME@TAG NEW\n" +
			"starts a new sandbox from it. A process with its working directory or an open file in /workspace\n" +
			"blocks a snapshot (the workspace is unmounted for it): the error names it.",
		Flags: []cli.Flag{dataFlag(), &cli.StringFlag{Name: "tag", Usage: "the snapshot's `TAG` (default: the time, 20261127-195700)"}},
		Subcommands: []*cli.Command{{
			Name:      "rm",
			Usage:     "remove a snapshot",
			UsageText: "capsem snapshot rm [--data DIR] NAME TAG",
			Flags:     []cli.Flag{dataFlag()},
			Action: func(c *cli.Context) error {
				if c.NArg() != 2 {
					return usageError{fmt.Errorf("want NAME and TAG, got %d arguments", c.NArg())}
				}
				name := c.Args().Get(0)
				if err := checkSandboxName(name); err != nil {
					return err
				}
				return supervisor.RemoveSnapshot(home.New(dataOf(c), name), c.Args().Get(1))
			},
		}},
		Action: func(c *cli.Context) error {
			d, err := sandboxArg(c)
			if err != nil {
				return err
			}
			if tag := c.String("tag"); tag != "" {
				if err := home.CheckTag(tag); err != nil {
					return usageError{err}
				}
			}
			client, _, err := runningClient(c, d.Name)
			if err != nil {
				return err
			}
			defer client.Close()
			m, err := client.TakeSnapshot(c.Context, c.String("tag"))
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s@%s\n", d.Name, m.Tag)
			fmt.Fprintf(c.App.ErrWriter, "capsem: snapshot %s@%s: %s on disk, the guest paused %.0f ms; capsem start --from %s@%s NEW forks it\n",
				d.Name, m.Tag, store.FormatSize(m.Bytes), m.PausedMS, d.Name, m.Tag)
			return nil
		},
	}
}

func snapshotsCommand() *cli.Command {
	return &cli.Command{
		Name:      "snapshots",
		Usage:     "list a sandbox's snapshots: tag, time, size on disk, the session it was taken in",
		UsageText: "capsem snapshots [--data DIR] [--json] NAME",
		Flags:     []cli.Flag{dataFlag(), &cli.BoolFlag{Name: "json", Usage: "a JSON array (see docs/API.md, GET /v1/snapshots)"}},
		Action: func(c *cli.Context) error {
			d, err := sandboxArg(c)
			if err != nil {
				return err
			}
			if !d.Exists() {
				return fmt.Errorf("no sandbox %q in %s", d.Name, dataOf(c))
			}
			all, err := d.Snapshots()
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if all == nil {
					all = []api.Snapshot{}
				}
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(all)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TAG\tCREATED\tSIZE\tPAUSED\tSESSION")
			for _, m := range all {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f ms\t%s\n", m.Tag, m.Created.Local().Format("2006-01-02 15:04:05"), store.FormatSize(m.Bytes), m.PausedMS, m.SessionID)
			}
			return tw.Flush()
		},
	}
}

func suspendCommand() *cli.Command {
	return &cli.Command{
		Name:      "suspend",
		Usage:     "save a running sandbox's guest and stop it; capsem start resumes it with its processes",
		UsageText: "capsem suspend [--data DIR] NAME",
		Flags:     []cli.Flag{dataFlag()},
		Action: func(c *cli.Context) error {
			d, err := sandboxArg(c)
			if err != nil {
				return err
			}
			client, _, err := runningClient(c, d.Name)
			if err != nil {
				return err
			}
			defer client.Close()
			m, err := client.Suspend(c.Context)
			if err != nil {
				return err
			}
			if !d.WaitUnlocked(supervisor.StopGrace) {
				return fmt.Errorf("sandbox %s was saved but its supervisor did not exit within %s; its log: %s", d.Name, supervisor.StopGrace, d.Log())
			}
			fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s suspended (%s saved, the guest paused %.0f ms); capsem start %s resumes it\n",
				d.Name, store.FormatSize(m.Bytes), m.PausedMS, d.Name)
			return nil
		},
	}
}

// splitFrom parses start's --from SANDBOX[@TAG].
func splitFrom(data, v string) (home.Dir, string, error) {
	name, tag, _ := strings.Cut(v, "@")
	if err := checkSandboxName(name); err != nil {
		return home.Dir{}, "", usageError{fmt.Errorf("--from %s: %w", v, err)}
	}
	if tag != "" {
		if err := home.CheckTag(tag); err != nil {
			return home.Dir{}, "", usageError{fmt.Errorf("--from %s: %w", v, err)}
		}
	}
	d := home.New(data, name)
	if !d.Exists() {
		return d, "", fmt.Errorf("--from %s: no sandbox %q in %s", v, name, data)
	}
	return d, tag, nil
}
