package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
)

// maxSocketPath is the longest unix socket path this code binds: sun_path
// holds 108 bytes on Linux and 104 on macOS, with the terminating NUL.
const maxSocketPath = 103

// socketPathIn is where an API of dir (a sandbox's, a running capsem
// run's session directory) listens: dir/api.sock when the path fits a unix
// socket address, else under $XDG_RUNTIME_DIR/capsem (or the temporary
// directory) by name and a hash of the directory.
func socketPathIn(dir, name string) string {
	p := filepath.Join(dir, "api.sock")
	if len(p) <= maxSocketPath {
		return p
	}
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = os.TempDir()
	}
	abs, _ := filepath.Abs(dir)
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(base, "capsem", name[:min(len(name), 40)]+"-"+hex.EncodeToString(sum[:8])+".sock")
}
