package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/loglevel"
	"github.com/capsem/capsem/sandbox/mcpserve"
)

// mcpTokenEnv gives capsem mcp serve --http its token without putting it
// on a command line other users can read (ps).
const mcpTokenEnv = "CAPSEM_MCP_TOKEN"

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "capsem as an MCP server: an MCP host's commands run in capsem sandboxes",
		Subcommands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve sandbox tools over MCP: stdio (the default), or streamable HTTP on loopback with a token",
			UsageText: "capsem mcp serve [--allow-create] [--policy FILE] [--secret NAME[@HOST,…]]… [--workspace DIR] [--prefix P] [--http 127.0.0.1:PORT]\n" +
				"   claude mcp add capsem -- capsem mcp serve --allow-create --policy agent.toml --secret ANTHROPIC_API_KEY",
			Description: "The tools: sandbox_start, sandbox_exec, sandbox_write_file, sandbox_read_file, sandbox_ls, sandbox_stop,\n" +
				"sandbox_rm, sandbox_events. The model picks names (under --prefix), commands and files; what it may create,\n" +
				"with which policy, secrets and workspace, is set here. With --http the server prints its URL and token on\n" +
				"stderr (or takes the token from $" + mcpTokenEnv + "); every request needs Authorization: Bearer TOKEN.",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "allow-create", Usage: "let sandbox_start create sandboxes and sandbox_rm remove them (without: only those that exist under --prefix are started, used and stopped)"},
				&cli.StringFlag{Name: "policy", Usage: "the policy `FILE` of the sandboxes it creates (default: capsem's default policy)"},
				secretFlag(),
				&cli.StringFlag{Name: "workspace", Usage: "the host `DIR` the sandboxes it creates share as /workspace (default: the current directory, unless it is / or your home directory)"},
				&cli.StringFlag{Name: "prefix", Value: mcpserve.DefaultPrefix, Usage: "what the names of the sandboxes it may touch start with"},
				&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on `ADDR` (loopback only, port 0: a free one) instead of stdio"},
				&cli.IntFlag{Name: "max-output", Value: mcpserve.DefaultMaxOutput, Usage: "the most `BYTES` of each of stdout and stderr sandbox_exec returns"},
				&cli.IntFlag{Name: "max-file", Value: mcpserve.DefaultMaxFile, Usage: "the largest file in `BYTES` sandbox_write_file and sandbox_read_file move"},
				&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "the server's log on stderr: debug, info, warn, error"},
				dataFlag(),
				caDirFlag(),
			},
			Action: mcpServe,
		}},
	}
}

// mcpServePath is --flag's value v made absolute and checked to be a
// directory (dir) or a file; "" stays "".
func mcpServePath(flag, v string, dir bool) (string, error) {
	if v == "" {
		return "", nil
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", usageError{fmt.Errorf("--%s: %v", flag, err)}
	}
	if dir && !st.IsDir() {
		return "", usageError{fmt.Errorf("--%s %s: not a directory", flag, v)}
	}
	if !dir && st.IsDir() {
		return "", usageError{fmt.Errorf("--%s %s: a directory, want a file", flag, v)}
	}
	return abs, nil
}

func mcpServe(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q: capsem mcp serve takes only flags", c.Args().First())}
	}
	log, err := loglevel.Logger(c.App.ErrWriter, c.String("log-level"))
	if err != nil {
		return usageError{err}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := mcpserve.Config{
		Data: c.String("data"), Prefix: c.String("prefix"), AllowCreate: c.Bool("allow-create"),
		Secrets: c.StringSlice("secret"), MaxOutput: c.Int("max-output"), MaxFile: c.Int("max-file"),
	}
	// Paths as the server was given them: a sandbox created later is
	// started by a capsem whose working directory is the server's, but
	// its settings keep them, and they must mean the same then.
	if cfg.Policy, err = mcpServePath("policy", c.String("policy"), false); err != nil {
		return err
	}
	if cfg.Workspace, err = mcpServePath("workspace", c.String("workspace"), true); err != nil {
		return err
	}
	if cfg.AllowCreate && cfg.Workspace == "" {
		// capsem start's default, the working directory, is the project
		// under Claude Code; a desktop host starts its servers in / or
		// the home directory, which no model's sandbox should be given.
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if home, _ := os.UserHomeDir(); wd == "/" || wd == home {
			return usageError{fmt.Errorf("--allow-create without --workspace would share %s with every sandbox the model creates: "+
				"give --workspace DIR (the project the sandboxes work on)", wd)}
		}
	}
	srv, err := mcpserve.New(cfg, mcpserve.CLI{Exe: exe, Data: cfg.Data, CADir: c.String("ca-dir")}, log)
	if err != nil {
		return usageError{err}
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr := c.String("http")
	if addr == "" {
		// stdout is the protocol's: nothing else is written there.
		err := srv.Run(ctx, &mcp.StdioTransport{})
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
			return nil
		}
		return err
	}
	if err := checkLoopback("--http", addr, "capsem mcp serve listens on the loopback only", "whoever reaches it with the token controls the sandboxes"); err != nil {
		return err
	}
	token, shown := os.Getenv(mcpTokenEnv), "$"+mcpTokenEnv
	if token == "" {
		if token, err = newToken(); err != nil {
			return err
		}
		shown = token
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "capsem mcp serve: http://%s/ (Authorization: Bearer %s)\n", ln.Addr(), shown)
	return mcpserve.ServeHTTP(ctx, ln, srv, token, log)
}
