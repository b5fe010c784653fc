package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/arch"
)

// TestStageH3Get: the HTTP/3 client put in the guest is a linux build for
// the guest's architecture — capsem itself, or capsem-linux-ARCH next to
// it for another architecture — and never a binary that cannot run there.
func TestStageH3Get(t *testing.T) {
	if runtime.GOOS != "linux" || arch.Host() == "" {
		t.Skipf("the doctor's guest client is a linux build; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	exe, err := os.Executable() // this test binary: an ELF for the host
	if err != nil {
		t.Fatal(err)
	}
	other := arch.ARM64
	if arch.Host() == arch.ARM64 {
		other = arch.AMD64
	}
	bin := t.TempDir()
	capsem := filepath.Join(bin, "capsem")
	if err := os.Symlink(exe, capsem); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		guest   arch.Arch
		sibling []byte // capsem-linux-<guest> next to capsem; nil: none
		want    string // prefix of the variable returned
		why     string
	}{
		{"host", arch.Host(), nil, "CAPSEM_DOCTOR_H3GET=", "capsem itself runs in a guest of its own architecture"},
		{"none", other, nil, "CAPSEM_DOCTOR_H3GET_MISSING=", "no build for the guest: the tests skip and say why"},
		{"wrong", other, readFile(t, exe), "CAPSEM_DOCTOR_H3GET_MISSING=", "a sibling built for the host does not run in the guest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sib := filepath.Join(bin, guestCapsemFile(tc.guest))
			os.Remove(sib)
			if tc.sibling != nil {
				if err := os.WriteFile(sib, tc.sibling, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			env, err := stageH3Get(capsem, tc.guest, dir, "/workspace/suite")
			if err != nil || !strings.HasPrefix(env, tc.want) {
				t.Fatalf("stageH3Get = %q, %v; want %s… (%s)", env, err, tc.want, tc.why)
			}
			_, statErr := os.Stat(filepath.Join(dir, doctorH3Get))
			if copied := statErr == nil; copied != strings.HasPrefix(tc.want, "CAPSEM_DOCTOR_H3GET=") {
				t.Errorf("client copied into the suite: %v (%s)", copied, tc.why)
			}
		})
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
