//go:build linux

package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A foreign tree's dpkg runs ca-certificates' update-ca-certificates twice
// under qemu-user (its configure, then its trigger): a shell script that
// spawns ~300 sed processes and openssl rehash, 35 s of the arm64 build's
// 159 s of mmdebstrap on x86-64 (measured: each emulated process start
// costs ~30 ms; the CPU model qemu-user emulates changes nothing). So
// during mmdebstrap the command is diverted to a no-op (the hooks below),
// and afterwards the tree's own script runs once on the host's sh, sed and
// openssl, with the tree's certificate directories bind-mounted where the
// script writes them, so that its symlinks name the guest's paths: 1.1 s,
// and the same /etc/ssl/certs, byte for byte and link for link
// (measured against the emulated run).

// updateCA is the command diverted while dpkg runs.
const updateCA = "/usr/sbin/update-ca-certificates"

// caDivertHooks are mmdebstrap's hooks around the diversion: set after
// the essential packages (before ca-certificates is installed), removed
// once every package is.
var caDivertHooks = []string{
	`--essential-hook=chroot "$1" dpkg-divert --quiet --local --rename --divert ` + updateCA + `.capsem-build --add ` + updateCA +
		` && printf '#!/bin/sh\nexit 0\n' > "$1` + updateCA + `" && chmod 755 "$1` + updateCA + `"`,
	`--customize-hook=rm -f "$1` + updateCA + `" && chroot "$1" dpkg-divert --quiet --local --rename --remove ` + updateCA,
}

// nativeCAScript runs the tree's update-ca-certificates ($1 the tree) with
// the host's tools, the tree's directories mounted over the host's (in a
// private mount namespace). Exit 3: the host lacks a mount point, and the
// caller runs it in the tree instead.
const nativeCAScript = `set -e
r=$1
for p in /etc/ssl/certs /usr/share/ca-certificates /etc/ca-certificates.conf; do
  [ -e "$p" ] && [ -e "$r$p" ] || { echo "no $p"; exit 3; }
  mount --bind "$r$p" "$p"
done
exec sh "$r` + updateCA + `" --fresh --hooksdir "" --localcertsdir "$r/usr/local/share/ca-certificates"`

// updateForeignCA makes the tree's /etc/ssl/certs after mmdebstrap ran
// with caDivertHooks: natively when the host has the mount points and the
// tree no update hooks (which the native run would skip), else in the tree.
func updateForeignCA(ctx context.Context, tree string) error {
	hooks, err := os.ReadDir(filepath.Join(tree, "etc", "ca-certificates", "update.d"))
	if (err == nil || errors.Is(err, fs.ErrNotExist)) && len(hooks) == 0 {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := inNamespace(cctx, "sh", "-c", nativeCAScript, "sh", tree).CombinedOutput()
		if err == nil {
			return nil
		}
		if !strings.HasPrefix(strings.TrimSpace(string(out)), "no /") {
			return fmt.Errorf("root filesystem: update-ca-certificates: %v\n%s", err, indent(strings.TrimSpace(string(out))))
		}
	}
	if out, err := inTree(ctx, tree, 5*time.Minute, "update-ca-certificates", "--fresh"); err != nil {
		return fmt.Errorf("root filesystem: update-ca-certificates in the tree: %v\n%s", err, indent(out))
	}
	return nil
}
