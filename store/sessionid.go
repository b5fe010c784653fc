package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// checkID reports whether id can name a session: 1 to 128 printable ASCII
// characters, no '/' and no space.
func checkID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("store: session id %q must be 1 to 128 characters", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return fmt.Errorf("store: session id %q: only printable ASCII without '/' or spaces is allowed", id)
		}
	}
	return nil
}

// NewSessionID returns a new session id that sorts by creation time: the UTC
// time to the second, a dash and 6 random hex digits, e.g.
// "20261121T210455Z-3f9a1c".
func NewSessionID() string {
	var r [3]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read does not fail
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:])
}
