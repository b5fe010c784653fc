// Command mcpbench measures what capsem's MCP gateway (package mcpgate)
// adds to a tools/call, side by side in one run over the namespace harness
// of tests/harness: a guest namespace whose TAP is pumped to capsem-net,
// whose policy names `capsem mcp-test-server` as the stdio server
// [mcp.servers.bench]. The same tool call (echo {text}) is made over each
// of these paths, with the official Go SDK's client (one session per path
// and repetition, -warmup calls, then -n sequential calls):
//
//   - direct: on the host, the client spawns `capsem mcp-test-server` and
//     speaks to it over stdio (CommandTransport): the baseline;
//   - gateway: in the guest, the client posts to
//     https://mcp.capsem.internal/bench (StreamableClientTransport, trusting
//     capsem's CA) — capsem-net's netstack, its TLS MITM, the gateway (the
//     tools/call decided by policy and recorded), and the same stdio server
//     the gateway started: the path a guest's agent takes;
//   - mitm (optional, in -paths by default): in the guest, the same tools
//     served as a remote streamable-HTTP server (this program re-executed
//     as "upstream", TLS with a CA of the benchmark's own) on host loopback,
//     reached through the MITM as an allowed host (mcp.test) whose MCP is
//     parsed and recorded: what the MITM alone costs an HTTP MCP server;
//   - http (optional): the host's client straight to that remote server,
//     the baseline of mitm.
//
// Each client is this program re-executed as "client", inside the
// namespace with ip netns exec or on the host, and prints the latencies'
// p50, p90, p99, mean and max; each figure reported is the median of -reps
// repetitions, each with a fresh capsem-net and namespace. "Added" is
// gateway minus direct (the budget: p50 ≤ 2 ms, report.go's budgetUs).
//
// What it must never do: run outside a benchmark (it creates namespaces and
// runs as root), or be imported by capsem itself.
//
// Run as root from the repository root: go run ./bench/mcpbench (-h for the
// flags).
package main
