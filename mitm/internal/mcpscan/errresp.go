package mcpscan

import (
	"encoding/json"
	"strconv"
)

// ErrorResponse returns a JSON-RPC 2.0 error response to the message whose
// id is id (JSON text, as in Message.ID; "" or text that is not JSON gives
// null, as the standard has for an id that could not be read), with code
// and message.
func ErrorResponse(id string, code int, message string) []byte {
	if id == "" || !json.Valid([]byte(id)) {
		id = "null"
	}
	b := make([]byte, 0, 64+len(id)+len(message))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, quote(message)...)
	return append(b, "}}"...)
}
