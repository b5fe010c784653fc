package home

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// ListenUnix listens on a unix socket at path that only its owner may
// connect to, with no moment at which another user could: the socket is
// bound in a fresh 0700 directory of ours, made 0600 there, and renamed
// into place. (The process umask is not touched: it is the process's, and
// a file another goroutine created meanwhile would get it too.) What is at
// path already is replaced only when it is a socket of ours, left by a
// supervisor that died — the sandbox's lock says none runs.
func ListenUnix(path string) (net.Listener, error) {
	if err := MakeSocketDir(path); err != nil {
		return nil, err
	}
	if err := staleSocketOK(path); err != nil {
		return nil, err
	}
	tmp, err := mkdirShort(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("capsem: listen on %s: %w (check that its directory is yours and writable)", path, err)
	}
	defer os.Remove(tmp)
	tp := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("capsem: listen on %s: %w (check that its directory is yours and writable)", path, err)
	}
	ln.SetUnlinkOnClose(false) // its name is path now; the caller removes it
	if err = os.Chmod(tp, 0o600); err == nil {
		err = os.Rename(tp, path)
	}
	if err != nil {
		ln.Close()
		os.Remove(tp)
		return nil, fmt.Errorf("capsem: listen on %s: %w (check that its directory is yours and writable)", path, err)
	}
	return ln, nil
}

// staleSocketOK is nil when nothing is at path, or a socket of ours.
func staleSocketOK(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Type() == fs.ModeSocket && st != nil && int(st.Uid) == os.Geteuid() {
		return nil
	}
	return fmt.Errorf("capsem: %s is in the way of the sandbox's socket and is not a socket of yours (%s): remove it", path, fi.Mode())
}

// mkdirShort makes a new 0700 directory in dir named "." and five random
// characters: dir/.XXXXX/s is as long as dir/api.sock, so that a socket
// path that fits fits there too.
func mkdirShort(dir string) (string, error) {
	const chars = "abcdefghijklmnopqrstuvwxyz234567"
	for range 100 {
		var b [5]byte
		_, _ = rand.Read(b[:])
		for i := range b {
			b[i] = chars[b[i]%32]
		}
		p := filepath.Join(dir, "."+string(b[:]))
		err := os.Mkdir(p, 0o700)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("capsem: no free temporary name for the socket next to it; remove the stale hidden directories there")
}
