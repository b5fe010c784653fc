package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
)

// maxSocketPath is the longest unix socket path this code binds: sun_path
// holds 108 bytes on Linux and 104 on macOS, with the terminating NUL.
const maxSocketPath = 103

// socketPathIn is where an API of dir (a sandbox's, a running capsem
// run's session directory) listens: dir/api.sock when the path fits a unix
// socket address, else in fallbackSocketDir by name and a hash of the
// directory.
func socketPathIn(dir, name string) string {
	p := filepath.Join(dir, "api.sock")
	if len(p) <= maxSocketPath {
		return p
	}
	abs, _ := filepath.Abs(dir)
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(fallbackSocketDir(), name[:min(len(name), 40)]+"-"+hex.EncodeToString(sum[:8])+".sock")
}

// fallbackSocketDir holds the sockets whose path in their own directory is
// too long: $XDG_RUNTIME_DIR/capsem, else capsem-UID in the temporary
// directory — one per user, so that another user's directory of that name
// (/tmp is everyone's) blocks no one else. Either must be ours and 0700
// (privateDir) before a socket is made in it.
func fallbackSocketDir() string {
	if base := os.Getenv("XDG_RUNTIME_DIR"); base != "" {
		return filepath.Join(base, "capsem")
	}
	return filepath.Join(os.TempDir(), "capsem-"+strconv.Itoa(os.Geteuid()))
}
