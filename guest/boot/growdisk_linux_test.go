//go:build linux

package boot

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// GrowDisk grows a mounted ext4 online to fill its lengthened device, as
// the guest's PID 1 does after capsem start --disk lengthened the file, and
// keeps what was on it; on a device it already fills it does nothing.
// Here on the host's kernel, through a loop device (the guest's kernel is
// tested by tests/TestSandboxSupervisorKilled).
func TestGrowDiskOnline(t *testing.T) {
	needRoot(t)
	// The kernel's resize wants CAP_SYS_RESOURCE (the guest's PID 1 has
	// every capability); a container's root may lack it.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil || caps[0].Effective&(1<<unix.CAP_SYS_RESOURCE) == 0 {
		t.Skip("needs CAP_SYS_RESOURCE, which EXT4_IOC_RESIZE_FS requires (this root lacks it)")
	}
	var mkfs, losetup string
	for _, tool := range []*struct {
		p    *string
		name string
	}{{&mkfs, "mkfs.ext4"}, {&losetup, "losetup"}} {
		for _, p := range []string{tool.name, "/usr/sbin/" + tool.name, "/sbin/" + tool.name} {
			if q, err := exec.LookPath(p); err == nil {
				*tool.p = q
				break
			}
		}
		if *tool.p == "" {
			t.Skipf("%s not installed (e2fsprogs, mount)", tool.name)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.ext4")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	// As guest/image.CreateDataDisk makes it.
	if out, err := exec.Command(mkfs, "-F", "-q", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	out, err := exec.Command(losetup, "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: %v: %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(losetup, "-d", loop).Run() })

	inNewNS(t, unix.CLONE_NEWNS)
	mnt := filepath.Join(dir, "rw")
	if err := Do(Mount{Source: loop, Target: mnt, FSType: "ext4", Flags: unix.MS_NODEV, Data: RWDiskOptions}); err != nil {
		t.Skipf("cannot mount ext4 here: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	kept := bytes.Repeat([]byte("written before the growth\n"), 1000)
	if err := os.WriteFile(filepath.Join(mnt, "f"), kept, 0o644); err != nil {
		t.Fatal(err)
	}

	g, err := GrowDisk(loop, mnt)
	if err != nil || g.Grew() || g.From != g.To || g.From < 50<<20 {
		t.Fatalf("on a device it fills: %+v, %v; want no growth of a ~64 MiB filesystem", g, err)
	}
	if err := os.Truncate(img, 256<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(losetup, "--set-capacity", loop).CombinedOutput(); err != nil {
		t.Fatalf("losetup --set-capacity: %v: %s", err, out)
	}
	g, err = GrowDisk(loop, mnt)
	if err != nil {
		t.Fatalf("GrowDisk after lengthening the device to 256 MiB: %v", err)
	}
	if !g.Grew() || g.To < 240<<20 || g.To > 256<<20 {
		t.Errorf("after lengthening the device to 256 MiB: %v (%+v), want ~256 MiB", g, g)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil || int64(st.Blocks)*st.Bsize != g.To {
		t.Errorf("df says %d bytes, GrowDisk %d (%v)", int64(st.Blocks)*st.Bsize, g.To, err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || !bytes.Equal(b, kept) {
		t.Errorf("the file written before the growth: %d bytes, %v", len(b), err)
	}
	if again, err := GrowDisk(loop, mnt); err != nil || again.Grew() || again.From != g.To {
		t.Errorf("a second GrowDisk: %+v, %v; want nothing done", again, err)
	}
	if _, err := GrowDisk(loop, dir); err == nil || !strings.Contains(err.Error(), "not an ext4 mount") {
		// dir is whatever filesystem holds the test's temporary files.
		var s unix.Statfs_t
		if unix.Statfs(dir, &s) == nil && s.Type != unix.EXT4_SUPER_MAGIC {
			t.Errorf("GrowDisk on a directory that is not an ext4 mount: %v", err)
		}
	}
}
