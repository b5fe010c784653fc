package mitm

import (
	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/inspect/mcp"
	"github.com/capsem/capsem/mitm/inspect/modelcall"
)

// newInspectors is the one list of the inspectors every request goes
// through, in order (package inspect says how the order runs: the request
// down the list, the response up it). The secrets and DLP guard is not in
// it: it is the built-in last stage of every exchange (chain.go), nearest
// the upstream, so that what it puts in (a bound secret's real value)
// reaches no inspector and what it takes out of a response reaches none.
//
// The order matters where inspectors overlap: a model call is claimed
// before MCP is looked for, so that a provider's API is not read as MCP
// (unless its host has MCP deny rules).
func newInspectors(cfg Config) []inspect.Inspector {
	return []inspect.Inspector{
		modelcall.New(),
		mcp.New(cfg.Recorder, cfg.Asks),
		altSvcBlock{},
	}
}
