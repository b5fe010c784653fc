// Package secret holds what keeps a credential out of the guest: the
// streaming replacement of a placeholder by its real value (and back) in
// bodies that arrive in chunks of any size.
//
// It imports nothing of capsem's and does no I/O but writing to the
// io.Writer it is given. It must never hold more of a stream than one
// pattern's length, never split a match that straddles two writes, and
// never write a byte of a pattern it replaces.
package secret
