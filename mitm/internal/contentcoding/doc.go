// Package contentcoding undoes HTTP content codings (RFC 9110 section 8.4)
// on a body that is pushed to it as it streams through the MITM: gzip
// (and x-gzip), deflate (zlib-wrapped, or raw as some servers send it), br
// (brotli), zstd, identity, and lists of them such as "gzip, br".
//
// [NewDecoder] returns an io.WriteCloser: the proxy writes the body bytes it
// forwards, and the decoded bytes are written to a destination (a parser) as
// soon as they can be decoded, so a streamed response is parsed while it
// streams. Decoding runs in one goroutine per coding, fed through an
// io.Pipe, so memory stays bounded by the decoders' windows.
//
// What it must never do:
//
//   - block the proxy for good or fail its writes: Write always reports the
//     whole input as written; after a decoding error, or once the output
//     limit is reached, further input is discarded at once. The error is
//     reported by Close and Err.
//   - produce more than the limit given to NewDecoder: a decompression bomb
//     stops at the limit (ErrLimit).
//   - leak its goroutines: Close waits for them, whatever state the stream
//     is in.
package contentcoding
