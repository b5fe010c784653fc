//go:build linux

package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/boot"
)

// The writable disk's growth reaches Ready: a new size in Root, a failure
// as a warning, nothing when the filesystem already filled its device.
func TestCollectGrowth(t *testing.T) {
	const root = "erofs /dev/vda (read-only) + ext4 /dev/vdb overlay"
	for _, tc := range []struct {
		r        growResult
		wantRoot string
		wantWarn string
		why      string
	}{
		{growResult{g: boot.Growth{From: 973 << 20, To: 1980 << 20}}, root + ", the writable disk grown from 973 to 1980 MiB", "", "start --disk 2 of a 1 GiB disk"},
		{growResult{g: boot.Growth{From: 973 << 20, To: 973 << 20}}, root, "", "every other boot: nothing to say"},
		{growResult{err: errors.New("grow /dev/vdb to 524288 blocks of 4096 bytes (EXT4_IOC_RESIZE_FS): operation not permitted")}, root, "operation not permitted", "a refusal is a warning; the boot goes on"},
	} {
		s := &stepper{log: newLogger(io.Discard, false)}
		s.ready.Root = root
		ch := make(chan growResult, 1)
		ch <- tc.r
		s.collectGrowth(ch)
		if s.ready.Root != tc.wantRoot {
			t.Errorf("%s: Root %q, want %q", tc.why, s.ready.Root, tc.wantRoot)
		}
		if got := strings.Join(s.ready.Warnings, "\n"); tc.wantWarn == "" && got != "" || !strings.Contains(got, tc.wantWarn) {
			t.Errorf("%s: warnings %q, want %q", tc.why, got, tc.wantWarn)
		}
	}
}
