package home

// Where an API socket is. A sandbox's (and a running capsem run's) socket
// is api.sock in its own directory when that path fits a unix socket
// address (at most MaxSocketPath bytes), else it falls back to
//
//	<fallback>/<name, cut at 40 bytes>-<hex of the first 8 bytes of sha256(absolute dir)>.sock
//	<fallback> = $XDG_RUNTIME_DIR/capsem when XDG_RUNTIME_DIR is set and not empty,
//	             else <temporary directory>/capsem-<effective uid>
//
// (the temporary directory as Go's os.TempDir has it: $TMPDIR, else /tmp).
// STABILITY: clients in other languages compute the same path
// (sdk/python/capsem/home.py; home_python_test.go checks that they agree):
// a change here is a change there, in the same commit.

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
)

// MaxSocketPath is the longest unix socket path capsem binds: sun_path
// holds 108 bytes on Linux and 104 on macOS, with the terminating NUL.
const MaxSocketPath = 103

// SocketPathIn is where an API of dir (a sandbox's, a running capsem
// run's session directory) named name listens: dir/api.sock when the path
// fits a unix socket address, else in FallbackSocketDir by name and a
// hash of the directory.
func SocketPathIn(dir, name string) string {
	p := filepath.Join(dir, "api.sock")
	if len(p) <= MaxSocketPath {
		return p
	}
	abs, _ := filepath.Abs(dir)
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(FallbackSocketDir(), name[:min(len(name), 40)]+"-"+hex.EncodeToString(sum[:8])+".sock")
}

// FallbackSocketDir holds the sockets whose path in their own directory is
// too long: $XDG_RUNTIME_DIR/capsem, else capsem-UID in the temporary
// directory — one per user, so that another user's directory of that name
// (/tmp is everyone's) blocks no one else. Either must be ours and 0700
// (MakeSocketDir) before a socket is made in it.
func FallbackSocketDir() string {
	if base := os.Getenv("XDG_RUNTIME_DIR"); base != "" {
		return filepath.Join(base, "capsem")
	}
	return filepath.Join(os.TempDir(), "capsem-"+strconv.Itoa(os.Geteuid()))
}
