package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MakeSocketDir makes the directory of the API socket at sock: the
// sandbox's (or session's) own directory, or the shared fallback
// (FallbackSocketDir), which must then be ours and private. It runs before
// the guest boots, so that a directory we cannot use fails the start at
// once, and again before the socket is bound.
func MakeSocketDir(sock string) error {
	dir := filepath.Dir(sock)
	if dir != FallbackSocketDir() {
		return os.MkdirAll(dir, 0o700)
	}
	return privateDir(dir)
}

// privateDir makes dir (mode 0700) unless it exists, and checks that it is
// a directory, not a symbolic link, owned by our effective uid, with no
// permission for group or others. The fallback directory sits in a
// directory every user can write to (/tmp): a user who made it first —
// 0777 for everyone, or a link to one of theirs — could put their own
// socket where our clients connect and receive every command's argv,
// environment and files.
func privateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("capsem: the socket directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("capsem: the socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("capsem: the socket directory: %w", err)
	}
	euid := os.Geteuid()
	var why, fix string
	switch st, _ := fi.Sys().(*syscall.Stat_t); {
	case fi.Mode()&fs.ModeSymlink != 0:
		why, fix = "is a symbolic link", "remove it (rm "+dir+")"
	case !fi.IsDir():
		why, fix = "is not a directory", "remove it (rm "+dir+")"
	case st == nil:
		why, fix = "has no owner this system reports", "remove it"
	case int(st.Uid) != euid:
		why = fmt.Sprintf("is owned by uid %d, not by you (uid %d): another user made it, and could put their own socket in it", st.Uid, euid)
		fix = "have root or its owner remove it (rm -r " + dir + ")"
	case fi.Mode().Perm()&0o077 != 0:
		why = fmt.Sprintf("has mode %04o: other users may put their own socket in it", fi.Mode().Perm())
		fix = "remove it (rm -r " + dir + "; capsem makes it again, 0700)"
	default:
		return nil
	}
	return fmt.Errorf("capsem: the socket directory %s %s; %s, or set XDG_RUNTIME_DIR to a directory of your own (the socket is there because its path in the sandbox's directory is over %d bytes)",
		dir, why, fix, MaxSocketPath)
}
