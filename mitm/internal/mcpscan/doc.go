// Package mcpscan reads MCP traffic as the MITM sees it on HTTP bodies:
// JSON-RPC 2.0 messages carried by MCP's streamable HTTP transport (a POST
// whose body is a message or a batch, answered with JSON or with an event
// stream; the GET event stream) and by the older HTTP+SSE transport (an
// event stream whose "endpoint" event names the URI to POST to).
//
// MCP is recognised by content, not by host, port or path: a body is MCP
// when it holds JSON-RPC 2.0 ([Body.JSONRPC]). [NewBody] reads a JSON body
// and [NewStream] an event stream, handing out one [Message] per request,
// notification or response as it ends: its kind, id, method, the tool (or
// prompt, or resource) it names, a preview of its params or result, the
// error of an error response, its size, and the tool names of a tools/list
// result. Both are built on package jsonscan (keeping only what a Message
// holds) and package sse.
//
// For the MITM's answers: [FilterTools] takes tools out of a tools/list
// result, [EventSplitter] cuts an event stream into whole events that can
// be rewritten ([EventData], [FormatEvent]), and [ErrorResponse] writes the
// JSON-RPC error that refuses a call.
//
// What it must never do:
//
//   - fail, block or panic on what it is fed: writers accept every byte and
//     return nil; a cut or garbage body yields the messages that ended
//     before the damage, and nothing else;
//   - hold unbounded memory: a body is never held whole; a message keeps at
//     most its caps (the preview cap, MaxIDBytes, MaxToolBytes,
//     MaxToolNames names), an event stream at most MaxEventBytes of one
//     event, an EventSplitter at most its cap; FilterTools works on one
//     message its caller already holds;
//   - hand out different messages for the same bytes cut differently;
//   - do I/O or decide anything: what is allowed is package policy's
//     business, and the MITM's to enforce.
package mcpscan
