package home

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// longSandboxDir is a sandbox directory whose api.sock does not fit a
// unix socket address, so that its socket falls back to
// fallbackSocketDir.
func longSandboxDir(t *testing.T) Dir {
	d := New(filepath.Join(t.TempDir(), strings.Repeat("long-directory-name/", 5)), "dev")
	if filepath.Dir(d.SocketPath()) != FallbackSocketDir() {
		t.Fatalf("%s is not in the fallback directory %s", d.SocketPath(), FallbackSocketDir())
	}
	return d
}

// The fallback socket directory is used only when it is ours and 0700: a
// directory another user made first (open to all, or private to them),
// one of ours open to others, a link or a file is refused with what to do
// — before the guest boots and again at listen — and nothing is bound.
func TestSocketDirIsOursAndPrivate(t *testing.T) {
	for _, c := range []struct {
		name  string
		root  bool // needs root: os.Chown to another uid
		setup func(dir string) error
		want  string // in the error; "" listens
		why   string
	}{
		{"absent", false, func(string) error { return nil }, "", "made 0700, ours"},
		{"ours 0700", false, func(d string) error { return os.Mkdir(d, 0o700) }, "", "kept as it is"},
		{"ours 0755", false, func(d string) error { return mkdirMode(d, 0o755, -1) }, "has mode 0755", "others could read it; and group or other write would let them put a socket in"},
		{"ours 0777", false, func(d string) error { return mkdirMode(d, 0o777, -1) }, "has mode 0777", "anyone may put a socket in it"},
		{"another user's 0777", true, func(d string) error { return mkdirMode(d, 0o777, 65534) }, "owned by uid 65534", "the takeover: their socket where our clients connect"},
		{"another user's 0700", true, func(d string) error { return mkdirMode(d, 0o700, 65534) }, "owned by uid 65534", "blocks every start: said so"},
		{"a link to a directory of ours", false, func(d string) error {
			if err := os.Mkdir(d+".real", 0o700); err != nil {
				return err
			}
			return os.Symlink(d+".real", d)
		}, "symbolic link", "a link another user made could point anywhere"},
		{"a file", false, func(d string) error { return os.WriteFile(d, nil, 0o600) }, "not a directory", "a file in the way"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root to make a directory of another uid")
			}
			t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
			d := longSandboxDir(t)
			dir := FallbackSocketDir()
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			errEarly := MakeSocketDir(d.SocketPath())
			ln, err := ListenUnix(d.SocketPath())
			if c.want == "" {
				if errEarly != nil || err != nil {
					t.Fatalf("%s: %v, %v", c.why, errEarly, err)
				}
				defer ln.Close()
				checkPrivate(t, dir, d.SocketPath())
				return
			}
			if ln != nil {
				ln.Close()
			}
			for _, err := range []error{errEarly, err} {
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "XDG_RUNTIME_DIR") || !strings.Contains(err.Error(), dir) {
					t.Errorf("%s: err %v, want one naming %s, saying %q and what to do", c.why, err, dir, c.want)
				}
			}
			if _, err := os.Lstat(d.SocketPath()); err == nil {
				t.Errorf("%s: a socket was bound at %s", c.why, d.SocketPath())
			}
		})
	}
}

// Without XDG_RUNTIME_DIR the fallback is capsem-UID in the temporary
// directory: another user's /tmp/capsem-UID of theirs blocks only that uid,
// and ours is checked all the same.
func TestSocketDirPerUID(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", t.TempDir())
	want := filepath.Join(os.TempDir(), "capsem-"+strconv.Itoa(os.Geteuid()))
	if got := FallbackSocketDir(); got != want {
		t.Fatalf("fallback %s, want %s", got, want)
	}
	d := longSandboxDir(t)
	if os.Geteuid() == 0 {
		// Another user's directory under the shared name and under ours.
		if err := mkdirMode(filepath.Join(os.TempDir(), "capsem"), 0o777, 65534); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := ListenUnix(d.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	checkPrivate(t, want, d.SocketPath())
	if os.Geteuid() == 0 {
		os.RemoveAll(want)
		if err := mkdirMode(want, 0o777, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := ListenUnix(d.SocketPath()); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("%s of uid 65534, 0777: err %v", want, err)
		}
	}
}

// The socket is 0600 however loose the umask, in its place and nowhere
// else (no temporary name left); a stale socket of ours is replaced, and
// anything else in its way is left alone and named.
func TestListenUnix(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	for i := range 2 { // the second finds the first's socket, stale (the caller removes it)
		ln, err := ListenUnix(sock)
		if err != nil {
			t.Fatal(i, err)
		}
		checkPrivate(t, "", sock)
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("dial %s: %v", sock, err)
		}
		c.Close()
		ln.Close()
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%s holds %d entries, want api.sock alone", dir, len(ents))
	}
	os.Remove(sock)
	if err := os.WriteFile(sock, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnix(sock); err == nil || !strings.Contains(err.Error(), "not a socket of yours") {
		t.Errorf("a file at the socket's path: err %v", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "keep" {
		t.Errorf("the file in the way was replaced")
	}
}

func mkdirMode(dir string, mode os.FileMode, uid int) error {
	if err := os.Mkdir(dir, mode); err != nil {
		return err
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		return err
	}
	if uid >= 0 {
		return os.Chown(dir, uid, uid)
	}
	return nil
}

// checkPrivate checks that sock is a socket of ours, 0600, and dir (when
// given) a directory of ours, 0700.
func checkPrivate(t *testing.T, dir, sock string) {
	t.Helper()
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{dir, os.ModeDir | 0o700}, {sock, os.ModeSocket | 0o600}} {
		if f.path == "" {
			continue
		}
		fi, err := os.Lstat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != f.mode || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Errorf("%s: %s uid %d, want %s uid %d", f.path, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, f.mode, os.Geteuid())
		}
	}
}
