package image

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A new data disk is a sparse file of exactly its size holding ext4, and
// grows; the host file takes a few MiB, not its size.
func TestCreateAndGrowDataDisk(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
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
	if err := GrowDataDisk(ctx, p, 2<<30); err != nil {
		t.Fatal(err)
	}
	if _, size, _ := DiskUsage(p); size != 2<<30 {
		t.Errorf("after growing: %d bytes", size)
	}
	if out, err := exec.Command("dumpe2fs", "-h", p).CombinedOutput(); err == nil && !strings.Contains(string(out), "capsem-rw") {
		t.Errorf("dumpe2fs: no label capsem-rw:\n%s", out)
	}
	if err := CreateDataDisk(ctx, filepath.Join(t.TempDir(), "tiny"), 1<<20); err == nil {
		t.Error("a 1 MiB disk was made")
	}
}
