//go:build linux

package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/capsem/capsem/sandbox/api"
)

// touchedResult is the touched-guest section's figures.
type touchedResult struct {
	mib   int
	fill  time.Duration // writing the random file in the guest
	snap  api.Snapshot  // after
	wall  time.Duration // capsem snapshot, exec to exit
	shmFS string        // what /dev/shm is in the guest
}

// touched writes mib MiB of random bytes into name's /dev/shm (a tmpfs:
// they sit in the guest's RAM, and random bytes are neither zero pages
// nor compressible), then snapshots name as tag.
func (b *bench) touched(name, tag string, mib int) (r touchedResult, err error) {
	r.mib = mib
	out, err := b.sh(cmdTimeout, name, "stat -f -c %T /dev/shm")
	if err != nil {
		return r, err
	}
	r.shmFS = strings.TrimSpace(out)
	if r.shmFS != "tmpfs" && r.shmFS != "ramfs" {
		return r, fmt.Errorf("the guest's /dev/shm is %q, not a tmpfs: the file would not sit in its RAM", r.shmFS)
	}
	const file = "/dev/shm/snapbench-touched.bin"
	want := int64(mib) << 20
	t0 := time.Now()
	out, err = b.sh(10*time.Minute, name, fmt.Sprintf("head -c %d /dev/urandom > %s && stat -c %%s %s", want, file, file))
	r.fill = time.Since(t0)
	if err != nil {
		return r, err
	}
	if n, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64); n != want {
		return r, fmt.Errorf("the guest wrote %q bytes to %s, want %d", strings.TrimSpace(out), file, want)
	}
	progress("%d MiB of /dev/urandom written to the guest's %s in %s", mib, file, msf(r.fill))
	if r.snap, r.wall, err = b.snapshot(name, tag); err != nil {
		return r, err
	}
	progress("snapshot of the touched guest: paused %.0f ms, %.1f MiB on disk, capsem snapshot took %s", r.snap.PausedMS, mibf(r.snap.Bytes), msf(r.wall))
	return r, nil
}
