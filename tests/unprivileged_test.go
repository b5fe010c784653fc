package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A normal user builds the guest image (in a user namespace, see
// guest/image/rootfs_userns_linux.go) and runs a sandbox through its life:
// start, exec, stop, start, rm. The image's files are root's inside the
// guest, the user's on the host; what the guest writes in the workspace is
// the user's, and nothing in the user's cache belongs to anyone else. One
// image build (1 m 40 s here, as long as root's): this test is the CI's
// cost of it.
func TestUnprivilegedUser(t *testing.T) {
	needGuest(t)
	if os.Geteuid() != 0 {
		t.Skip("making a throwaway user needs root")
	}
	for _, tool := range []string{"useradd", "userdel", "usermod", "runuser", "newuidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (go tool task deps installs uidmap)", tool)
		}
	}
	name := fmt.Sprintf("capsem-u%d", os.Getpid()%100000)
	home, err := os.MkdirTemp("", "capsem-user-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755)
	t.Cleanup(func() { os.RemoveAll(home) })
	if out, err := exec.Command("useradd", "--home-dir", home, "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	if out, err := exec.Command("usermod", "--add-subuids", "300000-365535", "--add-subgids", "300000-365535", name).CombinedOutput(); err != nil {
		t.Fatalf("usermod: %v %s", err, out)
	}
	uid, gid := lookupIDs(t, name)

	// The binaries and a workspace where the user can reach them.
	bin := filepath.Join(home, "bin")
	ws := filepath.Join(home, "ws")
	for _, d := range []string{bin, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{capsemBin, filepath.Join(filepath.Dir(capsemBin), "capsem-agent")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, filepath.Base(f)), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, uid, gid)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The user's environment: a login's, plus what reaches the registries
	// from here (a TLS-intercepting proxy's CA, proxies).
	env := []string{"HOME=" + home, "USER=" + name, "LOGNAME=" + name, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(strings.ToLower(k), "_proxy") || strings.HasSuffix(k, "_CA_CERTS") || strings.HasSuffix(k, "_CA_BUNDLE") ||
			k == "SSL_CERT_FILE" || k == "SSL_CERT_DIR" || strings.HasPrefix(strings.ToLower(k), "npm_config_") {
			env = append(env, kv)
		}
	}
	as := func(timeout time.Duration, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "capsem"), args...)
		cmd.Env = env
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		err := cmd.Run()
		t.Logf("as %s: capsem %s: %v", name, strings.Join(args, " "), time.Since(t0).Round(time.Millisecond))
		if ctx.Err() != nil {
			t.Fatalf("capsem %s did not finish within %v:\n%s", strings.Join(args, " "), timeout, out.String())
		}
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("capsem %s: %v", strings.Join(args, " "), err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}
	mustAs := func(timeout time.Duration, args ...string) string {
		t.Helper()
		out, code := as(timeout, args...)
		if code != 0 {
			t.Fatalf("as %s: capsem %s: exit %d\n%s", name, strings.Join(args, " "), code, out)
		}
		return out
	}
	t.Cleanup(func() { as(time.Minute, "rm", "--force", "box") })

	mustAs(30*time.Minute, "image", "build")
	imgs, _ := filepath.Glob(filepath.Join(home, ".cache", "capsem", "images", "rootfs", "*", "rootfs.erofs"))
	if len(imgs) != 1 {
		t.Fatalf("the user's image cache has %v", imgs)
	}
	// Everything the build left in the cache is the user's: no file of a
	// subordinate id (the tree's), no abandoned build directory.
	cache := filepath.Join(home, ".cache", "capsem")
	filepath.Walk(cache, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			t.Errorf("the user's cache: %v", err)
			return nil
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != uint32(uid) || st.Gid != uint32(gid) {
			t.Errorf("%s is %d:%d on the host, not the user's %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
		if strings.HasPrefix(info.Name(), ".build-") || info.Name() == ".tree" {
			t.Errorf("the build left %s", p)
		}
		return nil
	})
	// Inside the image, the files are root's as a root build records them.
	if _, err := exec.LookPath("dump.erofs"); err == nil {
		for path, want := range map[string]string{"/etc/shadow": "Uid: 0   Gid: 42  Access: 0640", "/root": "Uid: 0   Gid: 0  Access: 0700"} {
			out, err := exec.Command("dump.erofs", "--path="+path, imgs[0]).CombinedOutput()
			if err != nil || !strings.Contains(string(out), want) {
				t.Errorf("dump.erofs --path=%s: %v, want %q in\n%s", path, err, want, out)
			}
		}
	}

	mustAs(5*time.Minute, "start", "--workspace", ws, "box")
	out := mustAs(time.Minute, "exec", "box", "--", "sh", "-c",
		"id -u; stat -c '%u %g %a' /etc/shadow /usr/bin /root; echo from-guest > /workspace/f; echo kept > /root/k")
	if want := "0\n0 42 640\n0 0 755\n0 0 700\n"; out != want {
		t.Errorf("ownership inside the guest of a user-built image:\n%s\nwant\n%s(the image's files must be root's, as a root build makes them)", out, want)
	}
	if st, err := os.Stat(filepath.Join(ws, "f")); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Errorf("the file the guest wrote in the workspace is not the user's: %v", err)
	}
	mustAs(time.Minute, "stop", "box")
	mustAs(5*time.Minute, "start", "box")
	if out := mustAs(time.Minute, "exec", "box", "--", "cat", "/root/k"); out != "kept\n" {
		t.Errorf("after stop and start: %q", out)
	}
	mustAs(time.Minute, "rm", "--force", "box")
	if _, err := os.Stat(filepath.Join(home, ".local", "share", "capsem", "sandboxes", "box")); !os.IsNotExist(err) {
		t.Errorf("the sandbox is left after rm: %v", err)
	}
	if q := qemuOf(filepath.Join(home, ".local")); len(q) > 0 {
		t.Errorf("QEMU left after rm: %v", q)
	}
}

// lookupIDs is a user's uid and gid.
func lookupIDs(t *testing.T, name string) (int, int) {
	t.Helper()
	out, err := exec.Command("id", "-u", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	var uid, gid int
	fmt.Sscan(string(out), &uid)
	out, err = exec.Command("id", "-g", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(string(out), &gid)
	return uid, gid
}
