// Package provider turns the AI-provider traffic the MITM sees into
// store.ModelCall events: which model was asked what, what it answered, the
// tool calls it made, the tool results sent back to it, the tokens it used
// and what that cost.
//
// It knows four APIs, recognised by the request path alone (the host only
// becomes the call's Domain), so that a stand-in upstream is parsed like the
// real one:
//
//	anthropic  POST /v1/messages                           JSON or SSE
//	openai     POST /v1/chat/completions                   JSON or SSE (chunks, [DONE])
//	openai     POST /v1/responses                          JSON or SSE (response.* events)
//	google     POST /v1beta/models/{m}:generateContent     JSON
//	google     POST /v1beta/models/{m}:streamGenerateContent  SSE (alt=sse) or a JSON array
//
// The MITM calls [Detect] for each request; for a model call it feeds the
// decoded request body to [Call.RequestWriter] and the decoded response body
// to [Call.ResponseWriter] while they stream, then calls [Call.Finish], and
// [Tracer.Assign] links the calls of one tool loop.
//
// Bodies are read incrementally: JSON by package jsonscan's push-style
// tokenizer, which keeps only the values it is asked for, each capped; event
// streams by package sse, one event at a time. The fields:
//
//   - request: model, stream, system prompt preview, the number of messages
//     (or input items, or contents) and tools, a preview of the body, and the
//     tool results that are new in this request — those in the messages after
//     the last message the model wrote (tool_result blocks, role "tool"
//     messages, *_call_output items, functionResponse parts);
//   - response: message id, text and thinking previews, stop reason (for an
//     error body or error event, "error:" and the error's type), usage, and
//     the tool calls with their arguments assembled from the streamed deltas;
//   - tokens: InputTokens counts uncached input only, for every provider, so
//     that input + cache read + cache write is the whole prompt (OpenAI and
//     Gemini report cached tokens inside their prompt count; they are taken
//     out). Output includes reasoning tokens. UsageDetails keeps the
//     provider's own usage object;
//   - CostUSD from package pricing, by the model the response names (which
//     is more precise) or else the one requested.
//
// What it must never do:
//
//   - fail, block or panic on what it is fed: its writers always accept all
//     bytes and return nil; a truncated or garbage body yields whatever was
//     read before the damage;
//   - hold unbounded memory: a string is kept up to its cap
//     (Options.PreviewBytes, or Options.MaxToolArgBytes for tool arguments),
//     an event up to 8 MiB, at most 512 tool calls and 512 tool results, and a
//     body is never buffered whole;
//   - do I/O: it is pure parsing; the MITM decodes content codings (package
//     contentcoding) before feeding it.
package provider
