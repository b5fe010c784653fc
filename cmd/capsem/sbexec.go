package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command in a running sandbox",
		UsageText: "capsem exec [--env K=V]… [--workdir DIR] [--tty|--no-tty] [--timeout D] NAME -- CMD…",
		Description: "As capsem run does for its command: stdout and stderr streamed apart, stdin, signals (Ctrl-C\n" +
			"ends the command, not the sandbox), a pty when stdin and stdout are terminals. What the command\n" +
			"leaves (files, installed packages) stays for the next. Nothing of the host environment enters\n" +
			"but --env, the sandbox's --env and TERM, LANG, TZ. Exit status: the command's (124 after\n" +
			"--timeout, 127 not found); 1 when the sandbox does not run.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "env", Usage: "`K=V` for the command (repeatable)"},
			&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "the command's working `DIR` in the guest (default: /workspace)"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the command a pty (default: when stdin and stdout are terminals)"},
			&cli.BoolFlag{Name: "no-tty", Usage: "never give the command a pty"},
			&cli.DurationFlag{Name: "timeout", Usage: "kill the command after `D` (e.g. 10m; 0: never)"},
			dataFlag(),
		},
		Action: func(c *cli.Context) error {
			argv := c.Args().Slice()
			if len(argv) > 1 && argv[1] == "--" { // the flags end at NAME, so the "--" after it is an argument
				argv = append(argv[:1], argv[2:]...)
			}
			if len(argv) < 2 {
				return usageError{errors.New("want a sandbox NAME and a command: capsem exec [OPTIONS] NAME -- CMD…")}
			}
			o := execOptions{argv: argv[1:], timeout: c.Duration("timeout"), dir: c.String("workdir")}
			if o.timeout < 0 {
				return usageError{fmt.Errorf("--timeout %s: must not be negative", o.timeout)}
			}
			var err error
			if o.env, err = guestEnv(os.Environ(), c.StringSlice("env")); err != nil {
				return usageError{err}
			}
			if o.tty, err = ttyChoice(c); err != nil {
				return err
			}
			return execInSandbox(c, argv[0], o)
		},
	}
}

func shellCommand() *cli.Command {
	return &cli.Command{
		Name:      "shell",
		Usage:     "an interactive login shell in a running sandbox",
		UsageText: "capsem shell NAME",
		Flags:     []cli.Flag{dataFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError{errors.New("want one sandbox NAME")}
			}
			env, _ := guestEnv(os.Environ(), nil)
			return execInSandbox(c, c.Args().First(), execOptions{argv: []string{"bash", "-l"}, env: env, tty: isTerminal(os.Stdin) && isTerminal(os.Stdout)})
		},
	}
}

// ttyChoice reads --tty and --no-tty.
func ttyChoice(c *cli.Context) (bool, error) {
	switch {
	case c.Bool("tty") && c.Bool("no-tty"):
		return false, usageError{errors.New("--tty and --no-tty: pick one")}
	case c.Bool("tty"):
		return true, nil
	case c.Bool("no-tty"):
		return false, nil
	}
	return isTerminal(os.Stdin) && isTerminal(os.Stdout), nil
}

// runningClient is the API client of sandbox name, or an error that says
// how to get it running.
func runningClient(c *cli.Context, name string) (*api.Client, home.Dir, error) {
	if err := checkSandboxName(name); err != nil {
		return nil, home.Dir{}, err
	}
	d := home.New(dataOf(c), name)
	st, err := d.Status(policyFileSHA)
	if err != nil {
		return nil, d, err
	}
	switch st.State {
	case "running":
		return api.NewClient(d.SocketPath()), d, nil
	case "crashed":
		return nil, d, fmt.Errorf("sandbox %s crashed (%s; its log: %s): capsem start %s starts it again", name, st.Crash, st.Log, name)
	case api.StateSuspended:
		return nil, d, fmt.Errorf("sandbox %s is suspended: capsem start %s resumes it", name, name)
	}
	return nil, d, fmt.Errorf("sandbox %s is stopped: capsem start %s starts it", name, name)
}

// execInSandbox runs o in sandbox name through its API and returns
// exitStatus(the command's code).
func execInSandbox(c *cli.Context, name string, o execOptions) error {
	client, _, err := runningClient(c, name)
	if err != nil {
		return err
	}
	defer client.Close()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	start := func(ex proto.Exec) (execSession, error) {
		s, err := client.Exec(c.Context, api.ExecRequest{Argv: ex.Argv, Env: ex.Env, Workdir: ex.Dir, TTY: ex.TTY, Rows: ex.Rows, Cols: ex.Cols})
		if err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", name, err)
		}
		return s, nil
	}
	code, err := execute(start, o, sigs, c.App.Reader, c.App.Writer, c.App.ErrWriter)
	if err != nil {
		return err
	}
	return exitStatus(code)
}

// dataOf is --data as given to the command or to one it is a subcommand
// of (capsem policy --data D reload NAME).
func dataOf(c *cli.Context) string {
	for _, x := range c.Lineage() {
		if x.Command != nil && x.IsSet("data") {
			return x.String("data")
		}
	}
	return c.String("data")
}
