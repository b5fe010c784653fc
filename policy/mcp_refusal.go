package policy

import (
	"fmt"
	"strings"
)

// MCPGatewayHost is the name the guest reaches capsem's MCP gateway at:
// server NAME of [mcp.servers] is https://mcp.capsem.internal/NAME. Fake DNS
// answers it only while a server is configured, and no [network] entry is
// needed for it.
const MCPGatewayHost = "mcp.capsem.internal"

// ReasonMCPToolDenied: an [[mcp.rules]] entry with action "deny" matched a
// tools/call; Rule names it. The MITM and the gateway record it as the
// mcp_call's reason.
const ReasonMCPToolDenied = "mcp-tool-denied"

// MCPRefusalCode is the JSON-RPC error code of a refused MCP request. It is
// in the range JSON-RPC leaves to servers (-32000 to -32099); MCP's own
// errors use none of it below -32002.
const MCPRefusalCode = -32050

// MCPRefusal is the message of the JSON-RPC error a guest gets for an MCP
// request the policy refused: it starts with "capsem:", names the method,
// the tool and the rule the way the HTTP refusals do, and says what to do,
// so that an agent reading it knows why and does not retry. The MITM and
// the gateway both answer with it.
func MCPRefusal(method, tool string, d Decision) string {
	rule := d.Rule
	if rule == "" {
		rule = "(none)"
	}
	what := method
	if tool != "" {
		what = fmt.Sprintf("%s of tool %q", method, tool)
	}
	return strings.Join([]string{
		fmt.Sprintf("capsem: %s refused by %s (%s).", what, rule, d.Reason),
		"This sandbox's policy does not let the agent use this tool; do not retry it.",
		"If the task needs it, ask the user to allow it in the capsem policy file ([[mcp.rules]]).",
	}, " ")
}
