// Package sse is an incremental parser for Server-Sent Events
// (text/event-stream), as the WHATWG HTML standard specifies them
// ("9.2 Server-sent events", the "event stream interpretation" section).
//
// The MITM feeds it a decoded response body in whatever pieces the network
// delivers; the parser calls a function for each complete event. It handles
// LF, CR and CRLF line endings (a CRLF split across two writes included), an
// optional UTF-8 byte-order mark at the start of the stream, comments,
// multi-line data fields (joined with "\n"), the event, id and retry fields,
// and it dispatches an event on each blank line, as the standard says.
//
// What it must never do:
//
//   - fail or block: [Parser.Write] always accepts all its input;
//   - hold unbounded memory: an event larger than the limit given to
//     [NewParser] is truncated to that limit and flagged, and a single line
//     is never kept beyond that limit either;
//   - dispatch a partial event: [Parser.Close] discards an event that was not
//     ended by a blank line, as a browser does at the end of the stream;
//   - depend on how the stream was cut into writes: the events are the same
//     whether the input comes in one write or one byte at a time.
//
// It does not decode content codings (see package contentcoding) and does not
// replace invalid UTF-8: the bytes of the stream are passed through.
package sse
