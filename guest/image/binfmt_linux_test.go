//go:build linux

package image

import (
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/arch"
)

func TestCheckBinfmtEntry(t *testing.T) {
	const reg = "interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: %s\noffset 0\nmagic 7f454c46\n"
	for _, tc := range []struct {
		entry   string
		wantErr string
		why     string
	}{
		{"enabled\n" + strings.Replace(reg, "%s", "PF", 1), "", "Debian's qemu-user-static registration"},
		{"enabled\n" + strings.Replace(reg, "%s", "OCF", 1), "", "systemd-binfmt's flags from /usr/lib/binfmt.d"},
		{"disabled\n" + strings.Replace(reg, "%s", "PF", 1), "update-binfmts --enable qemu-aarch64", "a disabled entry runs nothing"},
		{"enabled\n" + strings.Replace(reg, "%s", "P", 1), "without F", "without F the interpreter is not found inside the chroot"},
	} {
		err := checkBinfmtEntry(arch.ARM64, tc.entry)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want %q", tc.why, err, tc.wantErr)
		}
	}
}
