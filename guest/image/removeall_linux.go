//go:build linux

package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"time"
)

// removeAll is os.RemoveAll, and for a normal user, when that leaves
// something, rm -rf again in a user namespace like the build's: a build in
// a user namespace that was killed before it removed its tree leaves files
// owned by the user's subordinate ids (apt's _apt owns 0700 directories
// there), which the user can remove only from that namespace.
func removeAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || os.Geteuid() == 0 {
		return err
	}
	if _, serr := os.Lstat(p); errors.Is(serr, fs.ErrNotExist) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, nerr := exec.CommandContext(ctx, "unshare", "--user", "--map-root-user", "--map-auto", "--",
		"rm", "-rf", "--one-file-system", "--", p).CombinedOutput()
	if nerr != nil {
		return fmt.Errorf("%w (and rm -rf in a user namespace: %v: %s)", err, nerr, bytes.TrimSpace(out))
	}
	return nil
}
