package store

// Model-call events: field numbers 192–255, and the numbers local to a
// tool call and a tool result. They are on disk in every store (see the
// format in codec.go): never change or reuse one; a new field takes the
// next number and becomes mcKnown.
const (
	fMCProvider            = 192
	fMCDomain              = 193
	fMCModel               = 194
	fMCMethod              = 195
	fMCPath                = 196
	fMCStream              = 197 // bool
	fMCSystemPromptPreview = 198
	fMCMessagesCount       = 199
	fMCToolsCount          = 200
	fMCRequestBytes        = 201
	fMCRequestBodyPreview  = 202
	fMCMessageID           = 203
	fMCStatusCode          = 204
	fMCTextContent         = 205
	fMCThinkingContent     = 206
	fMCStopReason          = 207
	fMCInputTokens         = 208
	fMCOutputTokens        = 209
	fMCCacheReadTokens     = 210
	fMCCacheWriteTokens    = 211
	fMCDuration            = 212 // nanoseconds
	fMCResponseBytes       = 213
	fMCCostUSD             = 214 // float64
	fMCTraceID             = 215
	fMCUsageDetails        = 216
	fMCToolCall            = 217 // repeated message: the tool* fields below
	fMCToolResult          = 218 // repeated message: the result* fields below
)

// The ModelCall block (lo inclusive, hi exclusive) and the highest number
// this build knows in it.
const mcLo, mcHi, mcKnown = 192, 256, fMCToolResult

// Fields of a tool call (inside fMCToolCall).
const (
	fToolIndex     = 1
	fToolCallID    = 2
	fToolName      = 3
	fToolArguments = 4
	fToolOrigin    = 5
)

// Fields of a tool result (inside fMCToolResult).
const (
	fResultCallID         = 1
	fResultContentPreview = 2
	fResultIsError        = 3 // bool
)

var (
	providers       = []string{"anthropic", "openai", "google"}
	providerDomains = []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"}
	toolOrigins     = []string{"native", "mcp"}
)

func (m *ModelCall) appendTo(b []byte) []byte {
	b = appendString(b, fMCProvider, m.Provider)
	b = appendString(b, fMCDomain, m.Domain)
	b = appendString(b, fMCModel, m.Model)
	b = appendString(b, fMCMethod, m.Method)
	b = appendString(b, fMCPath, m.Path)
	b = appendBool(b, fMCStream, m.Stream)
	b = appendString(b, fMCSystemPromptPreview, m.SystemPromptPreview)
	b = appendInt(b, fMCMessagesCount, int64(m.MessagesCount))
	b = appendInt(b, fMCToolsCount, int64(m.ToolsCount))
	b = appendInt(b, fMCRequestBytes, m.RequestBytes)
	b = appendString(b, fMCRequestBodyPreview, m.RequestBodyPreview)
	b = appendString(b, fMCMessageID, m.MessageID)
	b = appendInt(b, fMCStatusCode, int64(m.StatusCode))
	b = appendString(b, fMCTextContent, m.TextContent)
	b = appendString(b, fMCThinkingContent, m.ThinkingContent)
	b = appendString(b, fMCStopReason, m.StopReason)
	b = appendInt(b, fMCInputTokens, m.InputTokens)
	b = appendInt(b, fMCOutputTokens, m.OutputTokens)
	b = appendInt(b, fMCCacheReadTokens, m.CacheReadTokens)
	b = appendInt(b, fMCCacheWriteTokens, m.CacheWriteTokens)
	b = appendInt(b, fMCDuration, int64(m.Duration))
	b = appendInt(b, fMCResponseBytes, m.ResponseBytes)
	b = appendFloat(b, fMCCostUSD, m.CostUSD)
	b = appendString(b, fMCTraceID, m.TraceID)
	b = appendString(b, fMCUsageDetails, m.UsageDetails)
	// Each element written out here rather than by a method of its own:
	// its seven calls made encoding fullModelCall about 5% slower.
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		b = appendTag(b, fMCToolCall, wireBytes)
		start := len(b)
		b = appendInt(b, fToolIndex, int64(tc.Index))
		b = appendString(b, fToolCallID, tc.CallID)
		b = appendString(b, fToolName, tc.Name)
		b = appendString(b, fToolArguments, tc.Arguments)
		b = appendString(b, fToolOrigin, tc.Origin)
		b = prefixLength(b, start)
	}
	for i := range m.ToolResults {
		tr := &m.ToolResults[i]
		b = appendTag(b, fMCToolResult, wireBytes)
		start := len(b)
		b = appendString(b, fResultCallID, tr.CallID)
		b = appendString(b, fResultContentPreview, tr.ContentPreview)
		b = appendBool(b, fResultIsError, tr.IsError)
		b = prefixLength(b, start)
	}
	return b
}

func (m *ModelCall) setField(f field) error {
	switch f.num {
	case fMCProvider:
		return setIntern(&f, &m.Provider, providers)
	case fMCDomain:
		return setIntern(&f, &m.Domain, providerDomains)
	case fMCModel:
		return setString(&f, &m.Model)
	case fMCMethod:
		return setIntern(&f, &m.Method, methods)
	case fMCPath:
		return setString(&f, &m.Path)
	case fMCStream:
		return setBool(&f, &m.Stream)
	case fMCSystemPromptPreview:
		return setString(&f, &m.SystemPromptPreview)
	case fMCMessagesCount:
		return setInt(&f, &m.MessagesCount)
	case fMCToolsCount:
		return setInt(&f, &m.ToolsCount)
	case fMCRequestBytes:
		return setInt(&f, &m.RequestBytes)
	case fMCRequestBodyPreview:
		return setString(&f, &m.RequestBodyPreview)
	case fMCMessageID:
		return setString(&f, &m.MessageID)
	case fMCStatusCode:
		return setInt(&f, &m.StatusCode)
	case fMCTextContent:
		return setString(&f, &m.TextContent)
	case fMCThinkingContent:
		return setString(&f, &m.ThinkingContent)
	case fMCStopReason:
		return setString(&f, &m.StopReason)
	case fMCInputTokens:
		return setInt(&f, &m.InputTokens)
	case fMCOutputTokens:
		return setInt(&f, &m.OutputTokens)
	case fMCCacheReadTokens:
		return setInt(&f, &m.CacheReadTokens)
	case fMCCacheWriteTokens:
		return setInt(&f, &m.CacheWriteTokens)
	case fMCDuration:
		return setInt(&f, &m.Duration)
	case fMCResponseBytes:
		return setInt(&f, &m.ResponseBytes)
	case fMCCostUSD:
		return setFloat(&f, &m.CostUSD)
	case fMCTraceID:
		return setString(&f, &m.TraceID)
	case fMCUsageDetails:
		return setString(&f, &m.UsageDetails)
	case fMCToolCall:
		return addElement(&f, "tool call", &m.ToolCalls)
	case fMCToolResult:
		return addElement(&f, "tool result", &m.ToolResults)
	}
	return nil
}

func (tc *ToolCall) setField(f field) error {
	switch f.num {
	case fToolIndex:
		return setInt(&f, &tc.Index)
	case fToolCallID:
		return setString(&f, &tc.CallID)
	case fToolName:
		return setString(&f, &tc.Name)
	case fToolArguments:
		return setString(&f, &tc.Arguments)
	case fToolOrigin:
		return setIntern(&f, &tc.Origin, toolOrigins)
	}
	return nil // a field from a newer writer: skip it
}

func (tr *ToolResult) setField(f field) error {
	switch f.num {
	case fResultCallID:
		return setString(&f, &tr.CallID)
	case fResultContentPreview:
		return setString(&f, &tr.ContentPreview)
	case fResultIsError:
		return setBool(&f, &tr.IsError)
	}
	return nil // a field from a newer writer: skip it
}
