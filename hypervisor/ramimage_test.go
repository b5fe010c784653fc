//go:build unix

package hypervisor

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ramSample writes a RAM file of every kind of block: a hole, written
// zeros, random bytes, text, and a short last block.
func ramSample(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	size := int64(40*copyBlock + 1000)
	want := make([]byte, size)
	rand.Read(want[3*copyBlock : 5*copyBlock])
	copy(want[9*copyBlock:], bytes.Repeat([]byte("the guest's kernel text "), copyBlock/6))
	rand.Read(want[40*copyBlock:])
	want[20*copyBlock+7] = 1 // one byte in an otherwise zero block
	p := filepath.Join(dir, "ram")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < size; i += copyBlock {
		b := want[i:min(i+copyBlock, size)]
		if i/copyBlock == 30 || !allZero(b) { // block 30: zeros written, not a hole
			if _, err := f.WriteAt(b, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p, want
}

func TestRAMImageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src, want := ramSample(t, dir)
	img := filepath.Join(dir, "ram.lz4")
	n, err := SaveRAMImage(img, src, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(img)
	if st.Mode().Perm() != 0o600 || st.Size() != n {
		t.Fatalf("image: mode %v, %d bytes, SaveRAMImage said %d", st.Mode().Perm(), st.Size(), n)
	}
	// Stored: 2 random blocks and the random tail as they are, the text
	// block and the one-byte block compressed, nothing for zeros.
	if limit := int64(3*copyBlock + 1000 + 64<<10); n > limit {
		t.Fatalf("image of %d bytes, want at most %d", n, limit)
	}
	out, err := os.Create(filepath.Join(dir, "restored"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := out.Write(bytes.Repeat([]byte{0xee}, 100)); err != nil { // what a reused file held
		t.Fatal(err)
	}
	if _, err := LoadRAMImage(out, img); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out.Name())
	if !bytes.Equal(got, want) {
		t.Fatal("the expanded RAM differs from the saved one")
	}
}

// A damaged image is an error, never a panic nor a guest of garbage.
func TestRAMImageDamaged(t *testing.T) {
	dir := t.TempDir()
	src, _ := ramSample(t, dir)
	img := filepath.Join(dir, "ram.lz4")
	if _, err := SaveRAMImage(img, src, 0o600); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(img)
	entry := func(i int) int { return ramImageHeader + ramImageEntry*i }
	for _, c := range []struct {
		name   string
		break_ func(b []byte) []byte
		err    string
		why    string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "not a RAM image", "a raw RAM file or anything else"},
		{"cut in the index", func(b []byte) []byte { return b[:entry(3)] }, "cut short", "a copy that stopped early"},
		{"cut in the data", func(b []byte) []byte { return b[:len(b)-10] }, "damaged", "the last stored block runs past the end"},
		{"block count", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[20:], 3); return b }, "inconsistent", "the count must match the size"},
		{"kind", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[entry(3)+12:], 7); return b }, "damaged", "an unknown kind"},
		{"offset into the index", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[entry(3):], 0); return b }, "damaged", "blocks live after the index"},
		{"lz4 garbage", func(b []byte) []byte {
			for i := 0; i < 41; i++ {
				p := entry(i)
				if binary.LittleEndian.Uint32(b[p+12:]) == blockLZ4 {
					off := binary.LittleEndian.Uint64(b[p:])
					copy(b[off:], bytes.Repeat([]byte{0xff}, 16))
				}
			}
			return b
		}, "does not expand", "compressed bytes that are not what was stored"},
	} {
		bad := filepath.Join(dir, "bad")
		if err := os.WriteFile(bad, c.break_(bytes.Clone(good)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := os.Create(filepath.Join(dir, "out"))
		_, err := LoadRAMImage(out, bad)
		out.Close()
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error saying %q (%s)", c.name, err, c.err, c.why)
		}
	}
}
