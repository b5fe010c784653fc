package main

import (
	"github.com/urfave/cli/v2"
)

// secretFlag is --secret, which run and start share.
func secretFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "secret", Usage: "give the guest a placeholder for the host variable `NAME[@HOST,…]`, replaced by its real value only in requests to HOST (without @: the provider's API host for well-known names like ANTHROPIC_API_KEY) (repeatable)"}
}
