package ask

import (
	"strconv"

	"github.com/capsem/capsem/policy"
)

// Network is the question about name: on port (0 for its DNS query).
func Network(name string, port uint16) Question {
	q := Question{Kind: KindNetwork, Name: name, Port: port, Entry: name}
	if port != 0 && port != policy.DefaultPort {
		q.Entry = name + ":" + strconv.Itoa(int(port))
	}
	return q
}

// MCP is the question about a tools/call of tool on server.
func MCP(server, tool string) Question {
	q := Question{Kind: KindMCP, Name: server, Tool: tool}
	q.Entry = q.Grants().Entries()[0]
	return q
}

// Grants is what allowing q adds to a policy.
func (q Question) Grants() policy.Grants {
	if q.Kind == KindMCP {
		return policy.Grants{MCP: []policy.MCPGrant{{Server: q.Name, Tool: q.Tool}}}
	}
	return policy.Grants{Network: []string{q.Entry}}
}
