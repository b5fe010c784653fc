package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/learn"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
)

// sessionsFlags are where policy suggest and check read sessions, as
// inspect reads them: the store, or an export.
func sessionsFlags() []cli.Flag {
	return []cli.Flag{
		dataFlag(),
		&cli.StringFlag{Name: "sqlite", Usage: "read the sessions from `FILE`, a capsem export, instead of the store"},
	}
}

// readRecord gathers the decisions of sessions ids.
func readRecord(c *cli.Context, ids []string) (*learn.Record, error) {
	if len(ids) == 0 {
		return nil, usageError{errors.New("name one or more SESSIONs (capsem sessions lists them)")}
	}
	rec := learn.NewRecord()
	if file := c.String("sqlite"); file != "" {
		r, err := sqliteexport.OpenReader(file)
		if err != nil {
			return nil, fmt.Errorf("--sqlite: %w", err)
		}
		defer r.Close()
		for _, id := range ids {
			if _, err := r.Session(id); errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("%s: no session %s in it", display(file), display(id))
			}
		}
		return rec, readAll(r, ids, rec)
	}
	v, err := openStoreView(c)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	st, err := v.StoreOf(ids)
	if err != nil {
		return nil, err
	}
	return rec, readAll(st, ids, rec)
}

// eventSource is a store or an export: what holds sessions' events.
type eventSource interface {
	EventsAfter(id string, after uint64, fn func(store.Event) error) error
}

// readAll adds the events of sessions ids in src to rec.
func readAll(src eventSource, ids []string, rec *learn.Record) error {
	for _, id := range ids {
		if err := src.EventsAfter(id, 0, func(ev store.Event) error { rec.Add(id, ev); return nil }); err != nil {
			return fmt.Errorf("session %s: %w", display(id), err)
		}
	}
	return nil
}

func policySuggestCommand() *cli.Command {
	return &cli.Command{
		Name:  "suggest",
		Usage: "write the smallest policy under which sessions' allowed traffic is still allowed",
		UsageText: "capsem policy suggest [--data DIR | --sqlite FILE] [--from-denied] [--base POLICY] [-o FILE] SESSION...\n\n" +
			"Names the sessions resolved and connected to become [network] allow entries (N names under one\n" +
			"parent become \"*.parent\" when no refused name falls under it); the requests of a host with few\n" +
			"methods and path prefixes become [[http]] rules; MCP tools called become [[mcp.rules]]. Every\n" +
			"line says how many events it covers. --base keeps a policy's other tables (upstream, MCP\n" +
			"servers, forwards; secrets with their hosts cut to those reached); --from-denied adds what the\n" +
			"sessions were refused, each line marked.\n" +
			"Check the result with capsem policy check.",
		Flags: append(sessionsFlags(),
			&cli.BoolFlag{Name: "from-denied", Usage: "also allow what the sessions were refused (each line marked DENIED)"},
			&cli.StringFlag{Name: "base", Usage: "keep `POLICY`'s tables other than [network], [[http]] and [mcp] (the policy the sessions ran under, say)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the policy to `FILE` instead of stdout"},
		),
		Action: func(c *cli.Context) error {
			o := learn.Options{FromDenied: c.Bool("from-denied")}
			if b := c.String("base"); b != "" {
				if _, err := policy.Load(b); err != nil {
					return usageError{fmt.Errorf("--base: %w", err)}
				}
				text, err := os.ReadFile(b)
				if err != nil {
					return usageError{fmt.Errorf("--base: %w", err)}
				}
				o.Base, o.BaseName = string(text), b
			}
			rec, err := readRecord(c, c.Args().Slice())
			if err != nil {
				return err
			}
			s, err := learn.Suggest(rec, o)
			if err != nil {
				return err
			}
			if out := c.String("output"); out != "" {
				if err := os.WriteFile(out, s.Text, 0o644); err != nil {
					return err
				}
			} else if _, err := c.App.Writer.Write(s.Text); err != nil {
				return err
			}
			for _, ch := range s.Remaining {
				fmt.Fprintf(c.App.ErrWriter, "capsem: warning: the suggestion still decides otherwise: %s\n", display(ch.String()))
			}
			return nil
		},
	}
}

func policyCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "replay sessions' recorded decisions against a policy and list what it would decide otherwise (exit 1 when anything)",
		UsageText: "capsem policy check [--data DIR | --sqlite FILE] POLICY SESSION...\n\n" +
			"Every DNS answer, connection, decrypted request and MCP tool call a policy decided in the\n" +
			"sessions is decided again under POLICY; each that comes out otherwise (allowed -> denied, or\n" +
			"back) is listed with its events and the rule responsible. Exit 0: nothing would change.",
		Flags: sessionsFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() < 2 {
				return usageError{errors.New("want POLICY, then one or more SESSIONs")}
			}
			pol, err := policy.Load(c.Args().First())
			if err != nil {
				return usageError{err}
			}
			rec, err := readRecord(c, c.Args().Slice()[1:])
			if err != nil {
				return err
			}
			changes := learn.Check(pol, rec)
			for _, ch := range changes {
				fmt.Fprintln(c.App.Writer, display(ch.String()))
			}
			if len(changes) > 0 {
				return fmt.Errorf("%d of the sessions' decisions would change under %s", len(changes), c.Args().First())
			}
			fmt.Fprintf(c.App.ErrWriter, "capsem: no decision of %d events would change under %s\n", rec.Events, c.Args().First())
			return nil
		},
	}
}
