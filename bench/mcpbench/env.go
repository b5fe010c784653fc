package main

import (
	"fmt"

	"github.com/capsem/capsem/bench/internal/guestns"
)

// policyTemplate is the policy of every guest path: the gateway's stdio
// server [mcp.servers.bench] (capsem's own test server, its absolute path:
// the gateway gives it only PATH and HOME), and mcp.test allowed and
// resolved to the remote MCP server on host loopback, whose CA is the
// benchmark's. Everything else is the default a user gets: DLP logs,
// hide_denied, no [[mcp.rules]] (every tool allowed, still decided and
// recorded per call).
const policyTemplate = `[network]
default = "deny"
allow = ["mcp.test:443"]

[upstream]
resolve = { "mcp.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[mcp.servers.bench]
command = [%[3]q, "mcp-test-server"]
`

// startEnv starts a capsem-net and its guest namespace.
func (b *bench) startEnv(rep int) (*guestns.Env, error) {
	return guestns.Start(guestns.Config{
		CapsemNet: b.capsemNet, Root: b.dir, Name: fmt.Sprintf("rep%d", rep),
		Policy: fmt.Sprintf(policyTemplate, b.upstream.Port, b.upstreamCA, b.capsem),
		CADir:  b.caDir, MTU: *flagMTU, ProfileDir: *flagProfile, Verbose: *flagVerbose,
	})
}
