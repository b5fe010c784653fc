// Command bootinit is the /init of guest/image's boot smoke test: it loads
// the kernel modules listed in /lib/modules/capsem.order (virtio_mmio and
// virtio_console among them), looks at the devices the host attached (a
// NIC, a root disk, the 9p workspace, into which it writes from-guest.txt),
// writes "capsem-init-ok uptime=<s> net=… blk=… 9p=…" to the capsem.control
// virtio-serial port and powers the VM off. Static Go, no cgo.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	logf("bootinit: start")
	mount("devtmpfs", "/dev", "devtmpfs")
	mount("proc", "/proc", "proc")
	mount("sysfs", "/sys", "sysfs")
	if err := loadModules("/lib/modules/capsem.order"); err != nil {
		fail(err)
	}
	port, err := findPort("capsem.control", 10*time.Second)
	if err != nil {
		fail(err)
	}
	up, _ := os.ReadFile("/proc/uptime")
	msg := fmt.Sprintf("capsem-init-ok uptime=%s net=%s blk=%s 9p=%s\n",
		strings.Fields(string(up) + " ?")[0], nic(), disk(), workspace())
	f, err := os.OpenFile(port, os.O_WRONLY, 0)
	if err != nil {
		fail(err)
	}
	if _, err := f.WriteString(msg); err != nil {
		fail(err)
	}
	f.Close()
	logf("bootinit: %s", strings.TrimSpace(msg))
	poweroff()
}

// nic names the first non-loopback network interface, or "none".
func nic() string {
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		if e.Name() != "lo" {
			return e.Name()
		}
	}
	return "none"
}

// disk names the first virtio disk, or "none".
func disk() string {
	if _, err := os.Stat("/dev/vda"); err == nil {
		return "vda"
	}
	return "none"
}

// workspace mounts the 9p share "workspace" and writes a file into it:
// "ok", "none" (no share) or what failed.
func workspace() string {
	tags, _ := filepath.Glob("/sys/bus/virtio/drivers/9pnet_virtio/virtio*/mount_tag")
	found := false
	for _, t := range tags {
		b, _ := os.ReadFile(t)
		if string(bytes.TrimRight(b, "\x00\n")) == "workspace" {
			found = true
		}
	}
	if !found {
		return "none"
	}
	_ = os.MkdirAll("/mnt", 0o755)
	if err := syscall.Mount("workspace", "/mnt", "9p", 0, "trans=virtio,version=9p2000.L,msize=262144"); err != nil {
		return "mount-failed:" + strings.ReplaceAll(err.Error(), " ", "_")
	}
	if err := os.WriteFile("/mnt/from-guest.txt", []byte("capsem-9p-ok\n"), 0o644); err != nil {
		return "write-failed"
	}
	_ = syscall.Unmount("/mnt", 0)
	return "ok"
}

func logf(format string, a ...any) {
	if c, err := os.OpenFile("/dev/console", os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(c, format+"\n", a...)
		c.Close()
	}
}

func fail(err error) {
	logf("bootinit: FAIL: %v", err)
	poweroff()
}

func poweroff() {
	syscall.Sync()
	_ = syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	// No ACPI power-off: a reset ends QEMU too under -no-reboot.
	_ = syscall.Reboot(syscall.LINUX_REBOOT_CMD_RESTART)
	select {}
}

func mount(src, dst, fstype string) {
	_ = os.MkdirAll(dst, 0o755)
	if err := syscall.Mount(src, dst, fstype, 0, ""); err != nil && err != syscall.EBUSY {
		logf("bootinit: mount %s: %v", dst, err)
	}
}

// loadModules finit_module()s each module named in order (paths relative
// to the list's directory), in order; already-loaded is fine.
func loadModules(list string) error {
	b, err := os.ReadFile(list)
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(b)) {
		p := filepath.Join(filepath.Dir(list), name)
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("finit_module %s: %w", name, err)
		}
	}
	return nil
}

// findPort waits for the virtio-serial port called name and returns its
// /dev path.
func findPort(name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		ents, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, e := range ents {
			b, err := os.ReadFile(e)
			if err == nil && string(bytes.TrimSpace(b)) == name {
				dev := "/dev/" + filepath.Base(filepath.Dir(e))
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port named %q after %v", name, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
