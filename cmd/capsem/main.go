package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}

func main() {
	app := &cli.App{
		Name:    "capsem",
		Usage:   "run AI coding agents in a Linux VM whose only way out is capsem's filtering netstack",
		Version: version(),
		Description: "The network filter ships today as capsem-net (see its --help). `capsem run`, `capsem export`,\n" +
			"`capsem sessions` and `capsem inspect` are not built yet.",
		HideHelpCommand: true,
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "capsem:", err)
		os.Exit(1)
	}
}
