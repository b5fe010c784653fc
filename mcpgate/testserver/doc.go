// Package testserver is a tiny MCP server for capsem's own doctor and tests:
// it gives the MCP gateway (package mcpgate) a real process to start, call,
// crash and stop, speaking MCP through the official Go SDK, and the doctor
// a remote MCP server to serve inside its own process.
//
// Its tools:
//
//	echo  {text}       → text
//	add   {a, b}       → a+b, as text
//	env   {name}       → the value of that environment variable in this process ("" if unset)
//	calls {}           → how many tools/call this process served before this one
//	crash {}           → the process exits with status 3 (os.Exit), to test restarts
//	slow  {ms}         → "slept <ms>ms" after sleeping that long (capped at 60 s)
//
// plus the resource capsem://testserver/hello (text "hello from testserver"),
// the prompt "greet" {name}, and completion of greet's name argument.
//
// The env tool hands its caller whatever the server's environment holds: a
// gateway that gives a server secrets in its env must deny such a tool.
//
// New (and Run) are that server for a process of its own. NewInProcess is
// the one to serve inside another program: it has no crash tool, and its env
// tool reads only the map it is given.
//
// What it must never do: serve New's tools anywhere but a process of its own
// on the host side of a test or the doctor (crash ends the whole process,
// env reads the whole process environment), or read anything but its own
// environment (New) or the map it is given (NewInProcess).
package testserver
