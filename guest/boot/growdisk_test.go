package boot

import (
	"strings"
	"testing"
)

// The block count the guest asks the kernel to grow the writable disk's
// ext4 to: the device's whole blocks, and an error for what no ext4 has.
func TestResizeBlocks(t *testing.T) {
	for _, tc := range []struct {
		dev, bs int64
		want    uint64
		wantErr string
		why     string
	}{
		{2 << 30, 4096, 524288, "", "capsem start --disk 2: 2 GiB of 4 KiB blocks"},
		{1 << 40, 4096, 1 << 28, "", "1 TiB: past 2^32 bytes, no overflow"},
		{64<<20 + 1000, 1024, 65536, "", "a tail shorter than a block stays unused"},
		{3 * 65536, 65536, 3, "", "the largest ext4 block"},
		{4095, 4096, 0, "not one", "a device smaller than a block"},
		{0, 4096, 0, "not one", "an empty device"},
		{1 << 30, 0, 0, "not an ext4", "no block size: no division by zero"},
		{1 << 30, 512, 0, "not an ext4", "below ext4's smallest block"},
		{1 << 30, 3072, 0, "not an ext4", "not a power of two"},
		{1 << 30, 128 << 10, 0, "not an ext4", "above ext4's largest block"},
		{1 << 30, -4096, 0, "not an ext4", "a negative block size"},
	} {
		got, err := ResizeBlocks(tc.dev, tc.bs)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: ResizeBlocks(%d, %d) = %d, %v; want an error saying %q", tc.why, tc.dev, tc.bs, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: ResizeBlocks(%d, %d) = %d, %v; want %d", tc.why, tc.dev, tc.bs, got, err, tc.want)
		}
	}
}

// EXT4_IOC_RESIZE_FS as linux/ext4.h spells it: _IOW('f', 16, __u64).
func TestExt4IocResizeFS(t *testing.T) {
	if ext4IocResizeFS != 0x40086610 {
		t.Errorf("EXT4_IOC_RESIZE_FS = %#x, want 0x40086610", ext4IocResizeFS)
	}
}
