// Package secret holds what keeps a credential out of the guest and in its
// place: the streaming replacement of a placeholder by its real value (and
// back) in bodies that arrive in chunks of any size (Replacer), and the
// search for a placeholder or real value in every form a guest could write
// it — raw, percent-encoded, base64 and base64url at each byte alignment,
// hex — in a header, a URL or a streamed body (Matcher, Stream).
//
// It imports nothing of capsem's and does no I/O but writing to the
// io.Writer it is given. It must never hold more of a stream than the
// bytes a match could still start in, never split a match that straddles
// two writes, never write a byte of a pattern it replaces, and never put a
// value it finds in anything it returns but the Hit's id, form and offset.
package secret
