package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/mcpgate/testserver"
)

// mcpTestServerCommand is a stdio MCP server with harmless tools (echo,
// add, env, calls, crash, slow), for capsem doctor's MCP tests, the
// gateway's tests and its benchmark: a policy names it as
// [mcp.servers.NAME] command = ["capsem", "mcp-test-server"].
func mcpTestServerCommand() *cli.Command {
	return &cli.Command{
		Name:      "mcp-test-server",
		Usage:     "a stdio MCP server with test tools, for capsem doctor and the tests (its env tool returns any variable of its environment)",
		UsageText: "capsem mcp-test-server",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			return testserver.Run(c.Context, os.Stdin, os.Stdout)
		},
	}
}
