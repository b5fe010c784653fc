package main

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"

	"github.com/capsem/capsem/guest/arch"
)

// doctorH3Get is capsem itself in the suite's directory of the guest's
// workspace, run there as `capsem h3-get` by the HTTP/3 tests: the guest
// image has no HTTP/3 client (bookworm's curl and Python have none).
const doctorH3Get = "capsem-h3-get"

// stageH3Get copies exe into dir when it can run in a guest of
// architecture a (a linux build for a), and returns the variable that tells the
// suite where it is in the guest, or why it is absent.
func stageH3Get(exe string, a arch.Arch, dir, guestDir string) (string, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != a.String() {
		return fmt.Sprintf("CAPSEM_DOCTOR_H3GET_MISSING=this capsem is built for %s/%s; the guest runs linux/%s, so the HTTP/3 client (capsem itself) cannot be put in it",
			runtime.GOOS, runtime.GOARCH, a), nil
	}
	src, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("doctor: capsem itself, the guest's HTTP/3 client: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, doctorH3Get), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", fmt.Errorf("doctor: copying capsem into the workspace: %w", err)
	}
	if err := dst.Close(); err != nil {
		return "", err
	}
	return "CAPSEM_DOCTOR_H3GET=" + path.Join(guestDir, doctorH3Get), nil
}
