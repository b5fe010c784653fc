package main

import (
	"encoding/json"
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/h3get"
)

// h3GetCommand is the guest's HTTP/3 client, for capsem doctor: the guest
// image has none, and capsem itself is a static x86-64 binary the doctor
// can put in the guest's workspace.
func h3GetCommand() *cli.Command {
	return &cli.Command{
		Name:      "h3-get",
		Usage:     "GET a URL over HTTP/3 (quic-go) and print what happened as JSON, for capsem doctor in the guest",
		UsageText: "capsem h3-get [--sni NAME] [--addr HOST:PORT] [--ca FILE] [--timeout D] [--resume | --migrate] URL",
		Hidden:    true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sni", Usage: "send `NAME` as the TLS server name (default: the URL's host)"},
			&cli.StringFlag{Name: "addr", Usage: "dial `HOST:PORT` over UDP (default: the URL's host, port 443)"},
			&cli.StringFlag{Name: "ca", Usage: "trust the roots in PEM `FILE` (default: the system's)"},
			&cli.DurationFlag{Name: "timeout", Usage: "bound each request, its handshake included (0: 20s)"},
			&cli.BoolFlag{Name: "resume", Usage: "then GET again on a new connection resuming the first with 0-RTT if the server allows it"},
			&cli.BoolFlag{Name: "migrate", Usage: "then move the connection to another local port and GET again"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError{errors.New("h3-get takes one URL")}
			}
			if c.Bool("resume") && c.Bool("migrate") {
				return usageError{errors.New("h3-get: --resume or --migrate, not both")}
			}
			res := h3get.Fetch(h3get.Request{
				URL: c.Args().First(), SNI: c.String("sni"), Addr: c.String("addr"), CA: c.String("ca"),
				Timeout: c.Duration("timeout"), Resume: c.Bool("resume"), Migrate: c.Bool("migrate"),
			})
			enc := json.NewEncoder(c.App.Writer)
			if err := enc.Encode(res); err != nil {
				return err
			}
			if res.Status == 0 {
				return exitStatus(1)
			}
			return nil
		},
	}
}
