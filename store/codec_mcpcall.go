package store

// MCP call events: field numbers 512–575. They are on disk in every store
// (see the format in codec.go): never change or reuse one; a new field
// takes the next number and becomes mcpKnown.
const (
	fMCPServerName      = 512
	fMCPMethod          = 513
	fMCPToolName        = 514
	fMCPRequestID       = 515
	fMCPRequestPreview  = 516
	fMCPResponsePreview = 517
	fMCPDecision        = 518
	fMCPReason          = 519
	fMCPMatchedRule     = 520
	fMCPDuration        = 521 // nanoseconds
	fMCPErrorMessage    = 522
	fMCPBytesSent       = 523
	fMCPBytesReceived   = 524
)

// The MCPCall block (lo inclusive, hi exclusive) and the highest number
// this build knows in it.
const mcpLo, mcpHi, mcpKnown = 512, 576, fMCPBytesReceived

// mcpMethods are the usual MCP methods, interned when read.
var mcpMethods = []string{"initialize", "notifications/initialized", "tools/list", "tools/call", "resources/list", "resources/read", "prompts/list", "prompts/get", "ping"}

func (m *MCPCall) appendTo(b []byte) []byte {
	b = appendString(b, fMCPServerName, m.ServerName)
	b = appendString(b, fMCPMethod, m.Method)
	b = appendString(b, fMCPToolName, m.ToolName)
	b = appendString(b, fMCPRequestID, m.RequestID)
	b = appendString(b, fMCPRequestPreview, m.RequestPreview)
	b = appendString(b, fMCPResponsePreview, m.ResponsePreview)
	b = appendString(b, fMCPDecision, string(m.Decision))
	b = appendString(b, fMCPReason, m.Reason)
	b = appendString(b, fMCPMatchedRule, m.MatchedRule)
	b = appendInt(b, fMCPDuration, int64(m.Duration))
	b = appendString(b, fMCPErrorMessage, m.ErrorMessage)
	b = appendInt(b, fMCPBytesSent, m.BytesSent)
	b = appendInt(b, fMCPBytesReceived, m.BytesReceived)
	return b
}

func (m *MCPCall) setField(f field) error {
	switch f.num {
	case fMCPServerName:
		return setString(&f, &m.ServerName)
	case fMCPMethod:
		return setIntern(&f, &m.Method, mcpMethods)
	case fMCPToolName:
		return setString(&f, &m.ToolName)
	case fMCPRequestID:
		return setString(&f, &m.RequestID)
	case fMCPRequestPreview:
		return setString(&f, &m.RequestPreview)
	case fMCPResponsePreview:
		return setString(&f, &m.ResponsePreview)
	case fMCPDecision:
		return setIntern(&f, &m.Decision, decisions)
	case fMCPReason:
		return setString(&f, &m.Reason)
	case fMCPMatchedRule:
		return setString(&f, &m.MatchedRule)
	case fMCPDuration:
		return setInt(&f, &m.Duration)
	case fMCPErrorMessage:
		return setString(&f, &m.ErrorMessage)
	case fMCPBytesSent:
		return setInt(&f, &m.BytesSent)
	case fMCPBytesReceived:
		return setInt(&f, &m.BytesReceived)
	}
	return nil
}
