package main

import (
	"debug/elf"
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

// guestCapsemFile is the name of a linux build of capsem for a guest of
// architecture a other than this one's, next to capsem, which the doctor
// copies into such a guest as its HTTP/3 client (go tool task doctor:arm64
// builds bin/capsem-linux-arm64).
func guestCapsemFile(a arch.Arch) string { return "capsem-linux-" + a.String() }

// stageH3Get copies a capsem that runs in a guest of architecture a into
// dir — exe when it is a linux build for a, else guestCapsemFile(a) next
// to it — and returns the variable that tells the suite where it is in the
// guest, or why it is absent.
func stageH3Get(exe string, a arch.Arch, dir, guestDir string) (string, error) {
	src := exe
	if runtime.GOOS != "linux" || runtime.GOARCH != a.String() {
		src = filepath.Join(filepath.Dir(exe), guestCapsemFile(a))
		if err := checkELF(src, a); err != nil {
			return fmt.Sprintf("CAPSEM_DOCTOR_H3GET_MISSING=this capsem is built for %s/%s and the guest runs linux/%s; the HTTP/3 client is capsem itself, and a linux/%s build of it is not next to capsem (%v): go tool task doctor:%s builds %s",
				runtime.GOOS, runtime.GOARCH, a, a, err, a, guestCapsemFile(a)), nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("doctor: capsem itself, the guest's HTTP/3 client: %w", err)
	}
	defer in.Close()
	dst, err := os.OpenFile(filepath.Join(dir, doctorH3Get), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, in); err != nil {
		dst.Close()
		return "", fmt.Errorf("doctor: copying capsem into the workspace: %w", err)
	}
	if err := dst.Close(); err != nil {
		return "", err
	}
	return "CAPSEM_DOCTOR_H3GET=" + path.Join(guestDir, doctorH3Get), nil
}

// checkELF says why p is not a Linux executable for a.
func checkELF(p string, a arch.Arch) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Machine != a.Machine() || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s is an ELF for %s, not linux/%s", p, f.Machine, a)
	}
	return nil
}
