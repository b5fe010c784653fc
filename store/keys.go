package store

import (
	"bytes"
	"encoding/binary"
)

// The keys of a store: a session record under s/<id>, each event under
// e/<id>/<seq>. The layout is drawn in doc.go; it is on disk in every
// store, like the event format (see codec.go): never change it.

const (
	sessionPrefix = "s/"
	eventPrefix   = "e/"
)

func sessionKey(id string) []byte { return append([]byte(sessionPrefix), id...) }

func eventKeyPrefix(id string) []byte {
	b := make([]byte, 0, len(eventPrefix)+len(id)+1)
	b = append(b, eventPrefix...)
	b = append(b, id...)
	return append(b, '/')
}

// eventKeyLen is the length of every event key of session id.
func eventKeyLen(id string) int { return len(eventPrefix) + len(id) + 1 + 8 }

func appendEventKey(b []byte, id string, seq uint64) []byte {
	b = append(b, eventPrefix...)
	b = append(b, id...)
	b = append(b, '/')
	return binary.BigEndian.AppendUint64(b, seq)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
