// Package mcpserve is capsem as an MCP server (`capsem mcp serve`): its
// tools are sandboxes — sandbox_start, sandbox_exec, sandbox_write_file,
// sandbox_read_file, sandbox_ls, sandbox_stop, sandbox_rm, sandbox_events —
// so that any MCP host (Claude Code, Claude Desktop, an agent framework)
// runs its commands inside capsem's walls. It serves over stdio, or over
// streamable HTTP on loopback behind a bearer token (http.go).
//
// What a model may do is the host user's choice, made on the command line
// and fixed for the server's life ([Config]): which sandboxes it may touch
// (names under a prefix), whether it may create and remove them, with which
// policy, secrets and workspace. The model chooses names, commands and
// files; never a policy, a secret, a host path or a size.
//
// It must never hand a model more than its caps (a command's output, a
// file: cut, and said so), never touch a sandbox outside its prefix, and
// never write to stdout in stdio mode but the protocol. A sandbox's life
// (start, stop, rm, ls) goes through the capsem CLI ([Lifecycle]), so that
// creating one here is exactly `capsem start`; commands, files and events
// go through the sandbox's API (sandbox/api).
package mcpserve
