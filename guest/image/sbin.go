package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// sbinDirs are where root's tools live (chroot, mkfs.*), which a normal
// user's PATH on Debian leaves out.
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin"}

// lookPathSbin is exec.LookPath that also looks in sbinDirs.
func lookPathSbin(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, d := range sbinDirs {
		if st, serr := os.Stat(filepath.Join(d, name)); serr == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Join(d, name), nil
		}
	}
	return "", err
}

// pathWithSbin is $PATH with sbinDirs appended where missing, for the
// build's commands.
func pathWithSbin() string {
	path := os.Getenv("PATH")
	have := filepath.SplitList(path)
	for _, d := range sbinDirs {
		if !slices.Contains(have, d) {
			path += string(os.PathListSeparator) + d
		}
	}
	return path
}
