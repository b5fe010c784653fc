// Package secret holds what keeps a credential out of the guest and in its
// place: the streaming replacement of a placeholder by its real value (and
// back) in bodies that arrive in chunks of any size (Replacer), and the
// search for a placeholder or real value in every form a guest could write
// it — raw, percent-encoded, base64 and base64url at each byte alignment,
// hex — in a header, a URL or a streamed body (Matcher, Stream); and the
// scrubbing of a value out of a stream on its way to the guest, in those
// forms also when whitespace, JSON escapes or one string per event split
// it (Scrubber, ScrubStream).
//
// It imports nothing of capsem's and does no I/O but writing to the
// io.Writer it is given. It must never hold more of a stream than the
// bytes a match could still start in (a folded match: from FoldedHold
// characters on, and never more than MaxHeld bytes), never split a match
// that straddles two writes, never write a byte of a contiguous pattern it
// replaces, and never put a value it finds in anything it returns but the
// Hit's id, form and offset.
package secret
