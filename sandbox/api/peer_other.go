//go:build !linux && !darwin

package api

import "errors"

// fdPeerUID cannot be read here: the client refuses every socket rather
// than talk to one it cannot tell from another user's.
func fdPeerUID(int) (int, error) {
	return -1, errors.New("reading a unix socket's peer credentials is implemented for Linux and macOS only")
}
