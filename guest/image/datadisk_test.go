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
)

// A new data disk is a sparse file of exactly its size holding ext4, and
// grows; the host file takes a few MiB, not its size.
func TestCreateAndGrowDataDisk(t *testing.T) {
	if _, err := lookPathSbin("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed (apt-get install e2fsprogs)")
	}
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "disk.ext4")
	if err := CreateDataDisk(ctx, p, 1<<30); err != nil {
		t.Fatal(err)
	}
	used, size, err := DiskUsage(p)
	if err != nil || size != 1<<30 {
		t.Fatalf("size %d, %v; want 1 GiB", size, err)
	}
	if used > 64<<20 {
		t.Errorf("a new 1 GiB disk takes %d MiB on the host: it should be sparse", used>>20)
	}
	f, _ := os.Open(p)
	var sb [2]byte
	f.ReadAt(sb[:], 1080)
	f.Close()
	if sb != [2]byte{0x53, 0xef} {
		t.Errorf("no ext4 superblock magic: %x", sb)
	}
	if _, err := os.Stat(p + ".part"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
	if out, err := exec.Command("dumpe2fs", "-h", p).CombinedOutput(); err == nil && !strings.Contains(string(out), "capsem-rw") {
		t.Errorf("dumpe2fs: no label capsem-rw:\n%s", out)
	}
	if err := GrowDataDisk(p, 2<<30); err != nil {
		t.Fatal(err)
	}
	if used2, size, _ := DiskUsage(p); size != 2<<30 || used2 != used {
		t.Errorf("after growing: %d bytes, taking %d on the host (%d before); want 2 GiB, nothing more taken", size, used2, used)
	}
	if err := CreateDataDisk(ctx, filepath.Join(t.TempDir(), "tiny"), 1<<20); err == nil {
		t.Error("a 1 MiB disk was made")
	}
}

// Growing a disk the guest has written runs no host tool on it: a fake
// e2fsck and resize2fs first on PATH and in the sbin directories record
// being run, and must not be. The file is only lengthened: its bytes are
// the same, the new tail a hole. Before the fix GrowDataDisk ran both
// (e2fsck -f -p, then resize2fs) on the guest-written image.
func TestGrowDataDiskRunsNoTool(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	record := filepath.Join(dir, "ran")
	os.Mkdir(bin, 0o755)
	for _, tool := range []string{"e2fsck", "resize2fs", "fsck.ext4", "debugfs", "dumpe2fs", "tune2fs"} {
		script := "#!/bin/sh\necho \"" + tool + " $*\" >> '" + record + "'\nexit 0\n"
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	old := sbinDirs
	sbinDirs = append([]string{bin}, old...)
	t.Cleanup(func() { sbinDirs = old })

	// What a hostile guest left: not ext4 at all, bytes chosen to trip a
	// parser.
	disk := filepath.Join(dir, "disk.ext4")
	guestBytes := bytes.Repeat([]byte{0x53, 0xef, 0xff, 0x7f}, 64<<10)
	if err := os.WriteFile(disk, guestBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	used, _, _ := DiskUsage(disk)
	if err := GrowDataDisk(disk, 64<<20); err != nil {
		t.Fatalf("GrowDataDisk: %v", err)
	}
	if ran, err := os.ReadFile(record); err == nil {
		t.Errorf("GrowDataDisk ran host tools on the guest's disk:\n%s", ran)
	}
	got, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 64<<20 || !bytes.Equal(got[:len(guestBytes)], guestBytes) || bytes.ContainsFunc(got[len(guestBytes):], func(r rune) bool { return r != 0 }) {
		t.Errorf("the disk is %d bytes, its old bytes kept %v: want 64 MiB, the old bytes, then zeros", len(got), bytes.Equal(got[:min(len(got), len(guestBytes))], guestBytes))
	}
	if used2, _, _ := DiskUsage(disk); used2 > used+1<<20 {
		t.Errorf("lengthening took %d bytes on the host (from %d): the tail should be a hole", used2, used)
	}
}

// GrowDataDisk never shrinks a disk and lengthens only the regular file
// capsem made, never what a symlink, FIFO or device at its path leads to.
func TestGrowDataDiskRefuses(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("elsewhere"), 0o600)
	for _, tc := range []struct {
		name    string
		make    func(p string) error
		size    int64
		wantErr string
		why     string
	}{
		{"smaller", func(p string) error { return os.WriteFile(p, make([]byte, 8192), 0o600) }, 4096, "", "never shrinks: a smaller size is nothing to do"},
		{"same", func(p string) error { return os.WriteFile(p, make([]byte, 8192), 0o600) }, 8192, "", "the size it has is nothing to do"},
		{"symlink", func(p string) error { return os.Symlink(target, p) }, 1 << 20, "is a symlink", "the file a symlink leads to is not the disk"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, 1 << 20, "not a regular file", "a FIFO is refused, not waited on"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, 1 << 20, "", "a directory cannot be opened for writing"},
		{"missing", func(string) error { return nil }, 1 << 20, "no such file", "growing is not creating"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Lstat(p)
			err := GrowDataDisk(p, tc.size)
			switch {
			case tc.name == "smaller" || tc.name == "same":
				if err != nil {
					t.Errorf("%s: %v", tc.why, err)
				}
				if st, _ := os.Stat(p); st.Size() != before.Size() {
					t.Errorf("%s: the size changed from %d to %d", tc.why, before.Size(), st.Size())
				}
			case err == nil:
				t.Errorf("%s: no error", tc.why)
			case !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "data disk: "):
				t.Errorf("%s: %v, want a \"data disk: \" error saying %q", tc.why, err, tc.wantErr)
			}
		})
	}
	if b, _ := os.ReadFile(target); string(b) != "elsewhere" {
		t.Errorf("the symlink's target was changed: %q", b)
	}
}
