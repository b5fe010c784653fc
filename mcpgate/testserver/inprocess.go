package testserver

import (
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NewInProcess returns the test server for serving inside another program
// (as capsem doctor serves it over streamable HTTP to the guest, behind the
// MITM): the server New returns, less what would act on the program
// hosting it. It has no crash tool, since os.Exit there would end the host
// program for any client that can reach the server; and its env tool
// answers from env alone ("" for a name env lacks), never from the
// program's environment, which holds the user's whole environment. env is
// copied; nil means every name answers "".
func NewInProcess(env map[string]string) *mcp.Server {
	vars := maps.Clone(env)
	return newServer(func(name string) string { return vars[name] }, false)
}
