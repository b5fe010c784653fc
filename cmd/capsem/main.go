package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/version"
)

// exitUsage is the exit status for bad flags.
const exitUsage = 2

type usageError struct{ error }

// onUsageError makes urfave/cli's flag errors exit with exitUsage.
func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

func main() {
	image.RunRootfsJob() // a guest image build re-executes capsem in a user namespace
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	err := newApp(stdout, stderr).Run(args)
	if err == nil {
		return 0
	}
	var es exitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	// An error may quote the guest (an agent's message, its console).
	fmt.Fprintln(stderr, "capsem:", displayMessage(err.Error()))
	var ue usageError
	var ce *sandbox.ConfigError
	if errors.As(err, &ue) || errors.As(err, &ce) {
		return exitUsage
	}
	return 1
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:    "capsem",
		Usage:   "run AI coding agents in a Linux VM whose only way out is capsem's filtering netstack",
		Version: version.String(),
		Description: "capsem run boots a guest and runs a command in it; every event of the run is recorded, and\n" +
			"listed, inspected and exported here. The network filter alone ships as capsem-net.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    onUsageError,
		Commands: []*cli.Command{runCommand(), startCommand(), execCommand(), shellCommand(), lsCommand(), stopCommand(), suspendCommand(), snapshotCommand(), snapshotsCommand(), portCommand(), rmCommand(), policyCommand(), askCommand(),
			doctorCommand(), imageCommand(), caCommand(), exportCommand(), sessionsCommand(), inspectCommand(), superviseCommand(), mcpTestServerCommand(), mcpCommand(), h3GetCommand(), uiCommand()},
	}
	usageErrorsExit2(app.Commands)
	return app
}

// usageErrorsExit2 has every subcommand's flag errors exit with exitUsage,
// as the app's do.
func usageErrorsExit2(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = onUsageError
		}
		usageErrorsExit2(c.Subcommands)
	}
}
