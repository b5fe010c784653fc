package mcpgate

import (
	"bytes"
	"encoding/json"
)

// peekID returns the id of the JSON-RPC request in body, as the raw JSON the
// guest sent (a number or a quoted string), or "" when body is not one
// request with such an id (a notification, a batch, garbage).
func peekID(body []byte) string {
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return ""
	}
	id := bytes.TrimSpace(msg.ID)
	if len(id) == 0 {
		return ""
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return string(id)
	}
	return ""
}
