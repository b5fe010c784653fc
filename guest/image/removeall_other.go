//go:build !linux

package image

import "os"

// removeAll is os.RemoveAll: only Linux builds in a user namespace.
func removeAll(p string) error { return os.RemoveAll(p) }
