package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// capsem port: a sandbox's published ports. A running sandbox's are
// changed through its API (its supervisor holds the listeners); a stopped
// one's settings are changed in place, for its next start.

func portCommand() *cli.Command {
	return &cli.Command{
		Name:  "port",
		Usage: "publish a sandbox's guest ports on the host, unpublish them, list them",
		UsageText: "capsem port [--data DIR] NAME add [HOSTIP:]HOSTPORT:GUESTPORT[/tcp]\n" +
			"   capsem port [--data DIR] NAME rm [HOSTIP:]HOSTPORT:GUESTPORT[/tcp]\n" +
			"   capsem port [--data DIR] NAME [ls] [--json]",
		Description: "A published port is a listener on the host (127.0.0.1 unless HOSTIP is given; HOSTPORT 0 takes a\n" +
			"free one) whose connections capsem opens into the guest's GUESTPORT, each recorded as an inbound\n" +
			"flow. The guest's server must listen on 0.0.0.0 (or 198.18.0.2), not 127.0.0.1. Ports are kept in\n" +
			"the sandbox's settings: a stopped sandbox publishes them at its next start, and add or rm on a\n" +
			"stopped sandbox changes only its settings. A host port another program or sandbox holds is refused.",
		Flags:  []cli.Flag{dataFlag(), &cli.BoolFlag{Name: "json", Usage: "ls: a JSON array (see docs/API.md, GET /v1/ports)"}},
		Action: portAction,
	}
}

func portAction(c *cli.Context) error {
	args := c.Args().Slice()
	asJSON := c.Bool("json")
	args = slices.DeleteFunc(args, func(a string) bool {
		if a == "--json" {
			asJSON = true
			return true
		}
		return false
	})
	if len(args) == 0 {
		return usageError{errors.New("want a sandbox NAME (capsem port NAME [add SPEC | rm SPEC | ls])")}
	}
	name, verb := args[0], "ls"
	if err := checkSandboxName(name); err != nil {
		return err
	}
	if len(args) > 1 {
		verb = args[1]
	}
	d := home.New(dataOf(c), name)
	switch verb {
	case "ls":
		if len(args) > 2 {
			return usageError{fmt.Errorf("capsem port %s ls takes no more arguments", name)}
		}
		st, err := d.Status(nil)
		if err != nil {
			return err
		}
		return printPorts(c, st.Ports, asJSON)
	case "add", "rm":
		if len(args) != 3 {
			return usageError{fmt.Errorf("capsem port %s %s wants one SPEC: [HOSTIP:]HOSTPORT:GUESTPORT[/tcp]", name, verb)}
		}
		if _, err := ports.ParseSpec(args[2]); err != nil {
			return usageError{err}
		}
		if verb == "add" {
			return portAdd(c, d, args[2])
		}
		return portRm(c, d, args[2])
	}
	return usageError{fmt.Errorf("capsem port %s %s: want add, rm or ls", name, verb)}
}

func portAdd(c *cli.Context, d home.Dir, spec string) error {
	if d.Locked() {
		client, _, err := runningClient(c, d.Name)
		if err != nil {
			return err
		}
		defer client.Close()
		p, err := client.Publish(c.Context, spec)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, p.Spec)
		fmt.Fprintf(c.App.ErrWriter, "capsem: %s:%d on the host reaches port %d of sandbox %s\n", p.HostIP, p.HostPort, p.GuestPort, d.Name)
		return nil
	}
	sp, _ := ports.ParseSpec(spec)
	err := editStoppedPorts(c, d, func(s *home.Settings) error {
		var published []ports.Spec
		for _, q := range s.Ports {
			if qs, err := ports.ParseSpec(q); err == nil {
				published = append(published, qs)
			}
		}
		if q, taken := ports.Taken(published, sp); taken {
			return fmt.Errorf("sandbox %s publishes %s already (%s)", d.Name, sp.HostAddr(), q)
		}
		s.Ports = append(s.Ports, sp.String())
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, sp.String())
	fmt.Fprintf(c.App.ErrWriter, "capsem: sandbox %s is not running: its next start publishes %s\n", d.Name, sp)
	return nil
}

func portRm(c *cli.Context, d home.Dir, spec string) error {
	if d.Locked() {
		client, _, err := runningClient(c, d.Name)
		if err != nil {
			return err
		}
		defer client.Close()
		return client.Unpublish(c.Context, spec)
	}
	return editStoppedPorts(c, d, func(s *home.Settings) error {
		sp, _ := ports.ParseSpec(spec)
		n := len(s.Ports)
		s.Ports = slices.DeleteFunc(s.Ports, func(q string) bool {
			qs, err := ports.ParseSpec(q)
			return err == nil && qs.Names(sp)
		})
		if len(s.Ports) == n {
			return fmt.Errorf("sandbox %s does not publish %s (capsem port %s ls lists what it does)", d.Name, sp, d.Name)
		}
		return nil
	})
}

// editStoppedPorts changes a stopped sandbox's settings under its lock,
// so that a start does not read them half-changed.
func editStoppedPorts(c *cli.Context, d home.Dir, edit func(*home.Settings) error) error {
	lock, err := d.Lock()
	if err != nil {
		var ar home.AlreadyRunningError
		if errors.As(err, &ar) {
			return fmt.Errorf("sandbox %s started meanwhile: run the command again", d.Name)
		}
		return err
	}
	defer lock.Close()
	s, err := d.ReadSettings()
	if err != nil {
		return err
	}
	if err := edit(&s); err != nil {
		return err
	}
	return d.WriteSettings(s)
}

func printPorts(c *cli.Context, ps []api.Port, asJSON bool) error {
	if asJSON {
		if ps == nil {
			ps = []api.Port{}
		}
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(ps)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tGUEST\tPROTOCOL\tPUBLISHED")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", hostOf(p), p.GuestPort, p.Protocol, p.Published)
	}
	return tw.Flush()
}

// hostOf is a port's host address, "free" for a stopped sandbox's 0.
func hostOf(p api.Port) string {
	if p.HostPort == 0 {
		return p.HostIP + ":(free)"
	}
	if strings.Contains(p.HostIP, ":") {
		return "[" + p.HostIP + "]:" + strconv.Itoa(p.HostPort)
	}
	return p.HostIP + ":" + strconv.Itoa(p.HostPort)
}

// portsText is capsem ls's PORTS column: HOST->GUEST, comma-separated.
func portsText(ps []api.Port) string {
	var out []string
	for _, p := range ps {
		out = append(out, hostOf(p)+"->"+strconv.Itoa(p.GuestPort))
	}
	return strings.Join(out, ",")
}

// publishCLIFlag is --publish of capsem run and capsem start.
func publishCLIFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"},
		Usage: "publish a guest port on the host: `[HOSTIP:]HOSTPORT:GUESTPORT[/tcp]` (HOSTIP 127.0.0.1 unless given, HOSTPORT 0 a free one; repeatable)"}
}

// publishFlag parses --publish.
func publishFlag(c *cli.Context) ([]ports.Spec, error) {
	var out []ports.Spec
	for _, s := range c.StringSlice("publish") {
		sp, err := ports.ParseSpec(s)
		if err != nil {
			return nil, usageError{err}
		}
		if _, taken := ports.Taken(out, sp); taken {
			return nil, usageError{fmt.Errorf("--publish %s: %s is published twice", s, sp.HostAddr())}
		}
		out = append(out, sp)
	}
	return out, nil
}
