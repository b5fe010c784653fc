package mcpgate

import (
	"encoding/json"
	"strings"

	"github.com/capsem/capsem/store"
)

// capRecord caps the fields of c that the guest or a server controls before
// it is recorded: request_id and tool_name at the record's caps (the MITM's
// too), error_message at the preview size n — the refusal embeds the tool
// name and an isError result's text can be as long as the server likes.
func capRecord(c *store.MCPCall, n int) {
	c.RequestID = capID(c.RequestID)
	c.ToolName = capText(c.ToolName, store.MCPMaxToolBytes)
	c.ErrorMessage = capText(c.ErrorMessage, n)
}

// capText cuts s to at most n bytes, on a rune boundary.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return preview([]byte(s), n)
}

// capID cuts the raw JSON id (a number or a quoted string) to
// store.MCPMaxIDBytes, keeping it JSON: a string keeps its closing quote and
// is cut between characters, a number loses its trailing digits.
func capID(id string) string {
	const n = store.MCPMaxIDBytes
	if len(id) <= n {
		return id
	}
	if id[0] != '"' {
		return strings.TrimRight(id[:n], "eE+-.")
	}
	var s string
	if err := json.Unmarshal([]byte(id), &s); err != nil {
		return ""
	}
	out := []byte{'"'}
	for _, r := range s {
		b, _ := json.Marshal(string(r))
		enc := b[1 : len(b)-1]
		if len(out)+len(enc)+1 > n {
			break
		}
		out = append(out, enc...)
	}
	return string(append(out, '"'))
}
