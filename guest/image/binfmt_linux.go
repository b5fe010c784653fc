//go:build linux

package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/capsem/capsem/guest/arch"
)

// A root filesystem of a foreign architecture (arm64 on an x86-64 host) is
// built by running its programs — dpkg's maintainer scripts, node, npm's
// install scripts, the checks — through qemu-user, which the kernel starts
// for them through binfmt_misc. The registration must have the F flag: the
// kernel opens the interpreter when it is registered, so it is found from
// inside the tree's chroot and the build's user namespace, where its path
// does not exist. Debian's qemu-user-static registers every qemu-ARCH so
// (binfmt-support, or systemd-binfmt from /usr/lib/binfmt.d).

// binfmtPaths are where binfmt_misc and the packaged registrations are;
// tests point them elsewhere.
type binfmtPaths struct {
	mount string // binfmt_misc's mount point
	conf  string // systemd-binfmt's registrations, one file per format
}

var hostBinfmt = binfmtPaths{mount: "/proc/sys/fs/binfmt_misc", conf: "/usr/lib/binfmt.d"}

// binfmtFix is the command that makes a's programs run here.
func binfmtFix(a arch.Arch) string {
	return fmt.Sprintf("apt-get install qemu-user-static binfmt-support arch-test; mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc; update-binfmts --enable qemu-%s (go tool task deps:%s does all of it)", a.Uname(), a)
}

// foreignPreflight makes sure this host runs a's programs through
// qemu-user, doing what root may to get there: mounting binfmt_misc, and
// registering qemu-user-static's entry from its packaged registration. It
// fails with the commands to run when it cannot.
func foreignPreflight(a arch.Arch, p binfmtPaths) error {
	if !a.Foreign() {
		return nil
	}
	if _, err := lookPathSbin("arch-test"); err != nil {
		return fmt.Errorf("building a %s image needs arch-test (mmdebstrap checks the foreign architecture with it): apt-get install arch-test (go tool task deps:%s installs it)", a, a)
	}
	root := os.Geteuid() == 0
	name := "qemu-" + a.Uname()
	entry := filepath.Join(p.mount, name)
	if _, err := os.Stat(filepath.Join(p.mount, "register")); err != nil {
		if !root {
			return fmt.Errorf("building a %s image runs its programs through qemu-user, and binfmt_misc is not mounted at %s: as root, %s", a, p.mount, binfmtFix(a))
		}
		if err := syscall.Mount("binfmt_misc", p.mount, "binfmt_misc", 0, ""); err != nil {
			return fmt.Errorf("building a %s image runs its programs through qemu-user: mount binfmt_misc at %s: %v: %s", a, p.mount, err, binfmtFix(a))
		}
	}
	b, err := os.ReadFile(entry)
	if errors.Is(err, fs.ErrNotExist) && root {
		// Register it from the package's own line (":name:M::magic:mask:interpreter:flags").
		line, rerr := os.ReadFile(filepath.Join(p.conf, name+".conf"))
		if rerr != nil {
			return fmt.Errorf("building a %s image needs qemu-user-static (no %s registration in %s): %s", a, name, p.conf, binfmtFix(a))
		}
		if werr := os.WriteFile(filepath.Join(p.mount, "register"), []byte(strings.TrimSpace(string(line))), 0); werr != nil {
			return fmt.Errorf("building a %s image: register %s with binfmt_misc: %v: %s", a, name, werr, binfmtFix(a))
		}
		b, err = os.ReadFile(entry)
	}
	if err != nil {
		return fmt.Errorf("building a %s image runs its programs through qemu-user, and %s is not registered with binfmt_misc (%v): %s", a, name, err, binfmtFix(a))
	}
	return checkBinfmtEntry(a, string(b))
}

// checkBinfmtEntry checks a registration as binfmt_misc shows it: enabled,
// with the F flag, and an interpreter that exists.
func checkBinfmtEntry(a arch.Arch, s string) error {
	name := "qemu-" + a.Uname()
	var enabled bool
	var flags, interp string
	for _, l := range strings.Split(s, "\n") {
		switch {
		case l == "enabled":
			enabled = true
		case strings.HasPrefix(l, "flags: "):
			flags = strings.TrimPrefix(l, "flags: ")
		case strings.HasPrefix(l, "interpreter "):
			interp = strings.TrimPrefix(l, "interpreter ")
		}
	}
	switch {
	case !enabled:
		return fmt.Errorf("binfmt_misc's %s entry is disabled: update-binfmts --enable %s", name, name)
	case !strings.Contains(flags, "F"):
		return fmt.Errorf("binfmt_misc's %s entry has flags %q, without F: its interpreter %s is not found inside the build's chroot; register it with F (Debian's qemu-user-static does: %s)", name, flags, interp, binfmtFix(a))
	}
	return nil
}
