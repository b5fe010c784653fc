// Package jsonscan is a push-style JSON tokenizer for bodies that arrive in
// pieces and must never be held whole: [Scanner.Write] takes bytes in any
// pieces and calls a handler for each token with the path to it ([Scanner.At],
// [Scanner.HasPrefix], [Scanner.Index], [Scanner.Key]). The handler picks
// what to keep: a string value up to a cap it sets with [Scanner.Keep] (the
// rest is only counted), or a whole object or array as compact raw JSON up
// to a cap it gives [Scanner.Capture].
//
// Package provider reads model calls with it and package mcpscan reads
// MCP's JSON-RPC messages.
//
// What it must never do:
//
//   - buffer a whole value or body: a string is kept up to its cap, a key up
//     to MaxKeyBytes, a number up to MaxNumberBytes, a capture up to its cap,
//     and nesting is bounded by MaxDepth;
//   - fail, block or panic on what it is fed: Write always accepts all bytes
//     and returns nil; a syntax error or nesting deeper than MaxDepth stops
//     the scan (see [Scanner.Failed]) and what was reported before stays;
//   - report different tokens for the same bytes cut differently;
//   - do I/O.
package jsonscan
