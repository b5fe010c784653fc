package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/sandbox/supervisor"
	"github.com/capsem/capsem/store"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list the sandboxes: name, state (running, stopped, suspended, crashed), created, last started, policy, workspace, size, saved guests' size",
		UsageText: "capsem ls [--data DIR] [--json]",
		Flags:     []cli.Flag{dataFlag(), &cli.BoolFlag{Name: "json", Usage: "a JSON array of objects (name, state, created, …; see docs/API.md, Status)"}},
		Action: func(c *cli.Context) error {
			dirs, err := home.List(c.String("data"))
			if err != nil {
				return err
			}
			list := make([]api.Status, 0, len(dirs))
			for _, d := range dirs {
				st, err := d.Status(policyFileSHA)
				if err != nil {
					fmt.Fprintf(c.App.ErrWriter, "capsem: %v\n", err)
					continue
				}
				list = append(list, st)
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tCREATED\tSTARTED\tCPUS\tMEMORY\tDISK\tSAVED\tSESSION\tWORKSPACE\tPOLICY\tPORTS")
			for _, st := range list {
				started := "-"
				if !st.Started.IsZero() {
					started = st.Started.Local().Format("2006-01-02 15:04")
				}
				state := st.State
				if st.State == api.StateCrashed {
					state += " (log: " + st.Log + ")"
				}
				asked := ""
				if len(st.Asked) > 0 {
					asked = fmt.Sprintf(" +%d asked (%s)", len(st.Asked), strings.Join(st.Asked, ", "))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d MiB\t%s / %s\t%s\t%s\t%s\t%s %.12s%s\t%s\n", st.Name, state,
					st.Created.Local().Format("2006-01-02 15:04"), started, st.CPUs, st.MemoryMiB,
					store.FormatSize(st.DiskUsed), store.FormatSize(st.DiskSize), store.FormatSize(st.SnapshotBytes), dash(st.SessionID), st.Workspace, sandbox.PolicyName(st.Policy), st.PolicySHA256,
					asked, dash(portsText(st.Ports)))
			}
			return tw.Flush()
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "power a sandbox's guest off through its agent (sync, unmount); its disk and settings are kept",
		UsageText: "capsem stop [--data DIR] NAME",
		Flags:     []cli.Flag{dataFlag()},
		Action: func(c *cli.Context) error {
			d, err := sandboxArg(c)
			if err != nil {
				return err
			}
			name := d.Name
			st, err := d.Status(policyFileSHA)
			if err != nil {
				return err
			}
			switch st.State {
			case api.StateStopped:
				fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s is not running\n", name)
				return nil
			case api.StateSuspended:
				fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s is suspended, not running (capsem start %s resumes it; capsem start --cold %s discards its saved guest)\n", name, name, name)
				return nil
			case api.StateCrashed:
				d.ClearCrash()
				fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s had crashed (%s); it is marked stopped\n", name, st.Crash)
				return nil
			}
			return supervisor.Stop(c.Context, d, false)
		},
	}
}

func rmCommand() *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "delete a sandbox and its disk (its sessions stay in the event store)",
		UsageText: "capsem rm [--force] [--data DIR] NAME",
		Flags:     []cli.Flag{dataFlag(), &cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "stop a running sandbox first"}},
		Action: func(c *cli.Context) error {
			d, err := sandboxArg(c)
			if err != nil {
				return err
			}
			name := d.Name
			if !d.Exists() {
				if _, err := os.Stat(d.Dir); err != nil {
					return fmt.Errorf("no sandbox %q in %s", name, c.String("data"))
				}
			}
			if d.Locked() {
				if !c.Bool("force") {
					return fmt.Errorf("sandbox %s is running: capsem stop %s first, or capsem rm --force %s", name, name, name)
				}
				if err := supervisor.Stop(c.Context, d, true); err != nil {
					return err
				}
			}
			sock := d.SocketPath()
			if err := os.RemoveAll(d.Dir); err != nil {
				return fmt.Errorf("remove sandbox %s: %w", name, err)
			}
			_ = os.Remove(sock)
			// Its sessions' events still waiting to be moved are moved now.
			if _, err := sessionstore.Merge(c.String("data"), 2*time.Second); err != nil {
				fmt.Fprintf(c.App.ErrWriter, "capsem: warning: %v\n", err)
			}
			return nil
		},
	}
}

func policyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "a running sandbox's policy; the policy sessions needed, and what another would have decided",
		Flags: []cli.Flag{dataFlag()},
		Subcommands: []*cli.Command{{
			Name:      "reload",
			Usage:     "read the sandbox's policy file again: new flows and requests see it at once; a broken file keeps the policy in force",
			UsageText: "capsem policy reload [--data DIR] NAME",
			Flags:     []cli.Flag{dataFlag()},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usageError{errors.New("want one sandbox NAME")}
				}
				client, _, err := runningClient(c, c.Args().First())
				if err != nil {
					return err
				}
				defer client.Close()
				rl, err := client.ReloadPolicy(c.Context)
				var ae *api.Error
				if errors.As(err, &ae) && ae.Status == 422 {
					return usageError{errors.New(ae.Message)}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.ErrWriter, "capsem: %s: policy %s (sha256 %.12s) in force\n", c.Args().First(), rl.Policy, rl.SHA256)
				return nil
			},
		}, policySuggestCommand(), policyCheckCommand()},
	}
}
