//go:build linux

package image

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The ids of a normal user's build namespace, as `unshare --map-root-user
// --map-auto` makes them: root is the user, every other id one of the
// user's subordinate ids.
const (
	nsUser   = 1500
	nsSubIDs = 100000
)

// hostID is the host's id for the namespace's id.
func hostID(id int) int {
	if id == 0 {
		return nsUser
	}
	return nsSubIDs + id - 1
}

// testTreeEntry is one file of a small root filesystem.
type testTreeEntry struct {
	path     string
	mode     os.FileMode // os.ModeDir, os.ModeSymlink, or a regular file
	uid, gid int
	data     string // a symlink's target
}

// testTree is what an erofs root must keep: root's files, /etc/shadow
// 0:42 0640, a sticky /tmp, a setgid /var/mail, _apt's 0700 directory, a
// user's home, a symlink.
var testTree = []testTreeEntry{
	{"etc", os.ModeDir | 0o755, 0, 0, ""},
	{"etc/passwd", 0o644, 0, 0, "root:x:0:0:root:/root:/bin/sh\n"},
	{"etc/shadow", 0o640, 0, 42, "root:*:19000:0:99999:7:::\n"},
	{"tmp", os.ModeDir | os.ModeSticky | 0o777, 0, 0, ""},
	{"var", os.ModeDir | 0o755, 0, 0, ""},
	{"var/mail", os.ModeDir | os.ModeSetgid | 0o775, 0, 8, ""},
	{"var/partial", os.ModeDir | 0o700, 42, 65534, ""},
	{"var/partial/x", 0o600, 42, 65534, "apt\n"},
	{"home", os.ModeDir | 0o755, 0, 0, ""},
	{"home/u", os.ModeDir | 0o750, 1000, 1000, ""},
	{"home/u/.profile", 0o644, 1000, 1000, "PATH=/bin\n"},
	{"bin", os.ModeSymlink | 0o777, 0, 0, "usr/bin"},
}

// makeTestTree writes testTree under root, each owner mapped by owner, all
// times fixed.
func makeTestTree(t *testing.T, root string, owner func(int) int) {
	t.Helper()
	if err := os.Lchown(root, owner(0), owner(0)); err != nil {
		t.Fatal(err)
	}
	for _, e := range testTree {
		p := filepath.Join(root, e.path)
		var err error
		switch {
		case e.mode&os.ModeDir != 0:
			err = os.Mkdir(p, 0o700)
		case e.mode&os.ModeSymlink != 0:
			err = os.Symlink(e.data, p)
		default:
			err = os.WriteFile(p, []byte(e.data), 0o600)
		}
		if err == nil {
			err = os.Lchown(p, owner(e.uid), owner(e.gid))
		}
		if err == nil && e.mode&os.ModeSymlink == 0 {
			err = os.Chmod(p, e.mode)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	ts := []unix.Timespec{{Sec: 1700000000}, {Sec: 1700000000}}
	for _, p := range append([]string{"."}, pathsOf(testTree)...) {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(root, p), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
}

func pathsOf(es []testTreeEntry) []string {
	var ps []string
	for _, e := range es {
		ps = append(ps, e.path)
	}
	return ps
}

// TestMkfsErofsSameBytesInUserNS: mkfs.erofs run as root over a tree, and
// run in a normal user's build namespace over the same tree as that
// namespace owns it on the host (root's files the user's, the others'
// subordinate ids), make the same bytes. So a normal user's build records
// every file as root's build does, and one recipe's tree gives one image
// whoever builds it.
func TestMkfsErofsSameBytesInUserNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: writing a user namespace's id map for ids no user owns")
	}
	if _, err := exec.LookPath("mkfs.erofs"); err != nil {
		t.Skip("mkfs.erofs not installed (apt-get install erofs-utils)")
	}
	base, err := os.MkdirTemp("", "capsem-erofs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// The namespace's root is host uid nsUser: it must reach its tree.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	rootTree, nsTree, out := filepath.Join(base, "root"), filepath.Join(base, "ns"), filepath.Join(base, "out")
	for _, d := range []string{rootTree, nsTree, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	makeTestTree(t, rootTree, func(id int) int { return id })
	makeTestTree(t, nsTree, hostID)
	if err := os.Chown(out, nsUser, nsUser); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const epoch = 1700000000
	asRoot := filepath.Join(base, "root.erofs")
	if out, err := mkfsErofsCmd(ctx, rootTree, asRoot, DefaultRootfs.Compression, epoch).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.erofs as root: %v\n%s", err, out)
	}
	inNS := filepath.Join(out, "ns.erofs")
	cmd := mkfsErofsCmd(ctx, nsTree, inNS, DefaultRootfs.Compression, epoch)
	maps := []syscall.SysProcIDMap{{ContainerID: 0, HostID: nsUser, Size: 1}, {ContainerID: 1, HostID: nsSubIDs, Size: 65535}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: maps,
		GidMappings: maps,
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkfs.erofs in a user namespace: %v\n%s", err, out)
	}

	a, err := os.ReadFile(asRoot)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(inNS)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("mkfs.erofs in a user namespace made other bytes than as root (%d and %d bytes)", len(b), len(a))
	}
	// And what both say of /etc/shadow is root's 0:42 0640.
	if _, err := exec.LookPath("dump.erofs"); err == nil {
		info, err := exec.Command("dump.erofs", "--path=/etc/shadow", inNS).CombinedOutput()
		if err != nil {
			t.Fatalf("dump.erofs: %v\n%s", err, info)
		}
		for _, want := range []string{"Uid: 0 ", "Gid: 42 ", "Access: 0640"} {
			if !strings.Contains(string(info), want) {
				t.Errorf("/etc/shadow in the image: no %q in\n%s", want, info)
			}
		}
	}
}

func TestHasSubIDs(t *testing.T) {
	f := filepath.Join(t.TempDir(), "subuid")
	if err := os.WriteFile(f, []byte("alice:100000:65536\n1001:165536:65536\nbob:231072:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, uid string
		want      bool
	}{
		{"alice", "1000", true},
		{"carol", "1001", true}, // by uid
		{"bob", "1002", false},  // an empty range
		{"dave", "1003", false},
	} {
		if got := hasSubIDs(f, c.name, c.uid); got != c.want {
			t.Errorf("hasSubIDs(%s, %s) = %v, want %v", c.name, c.uid, got, c.want)
		}
	}
	if hasSubIDs(filepath.Join(t.TempDir(), "none"), "alice", "1000") {
		t.Error("a missing file has a range")
	}
}
