//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is capsem's own lock on a store directory, taken before
// pebble's so that the error can name the holder: the file holds the pid of
// the process that has the store open. flock(2) locks belong to the open
// file, so a second Open in the same process is refused too, and the kernel
// drops the lock when the holder dies, even by SIGKILL.
const lockFileName = "capsem-store.lock"

type dirLock struct{ f *os.File }

func (l dirLock) Close() error {
	// Closing the file releases the flock. The stale pid is harmless: it is
	// only read when the lock is held.
	return l.f.Close()
}

func lockDir(dir string, readOnly bool) (io.Closer, error) {
	path := filepath.Join(dir, lockFileName)
	// A read-only opener records its pid too, so that a writer refused
	// meanwhile is told who holds the store; when it may not write (a
	// read-only file system, another user's store) it locks without.
	writable := true
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil && readOnly {
		writable = false
		f, err = os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			// Not written by capsem: pebble's own lock still protects it.
			return io.NopCloser(nil), nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: open lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &InUseError{Dir: dir, PID: readPID(f)}
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	if writable {
		if err := writePID(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("store: write pid to %s: %w", path, err)
		}
	}
	return dirLock{f}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

func readPID(f *os.File) int {
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
