package image

import (
	"bytes"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"testing"

	"github.com/ulikunitz/xz"
)

// x86ish is data with many E8/E9 call/jump opcodes followed by small
// relative offsets, the pattern BCJ rewrites.
func x86ish(n int) []byte {
	rng := rand.New(rand.NewSource(1))
	b := make([]byte, n)
	for i := 0; i < n; i++ {
		switch rng.Intn(10) {
		case 0:
			b[i] = 0xe8
		case 1:
			b[i] = 0xe9
		case 2, 3:
			b[i] = 0xff
		case 4, 5, 6:
			b[i] = 0
		default:
			b[i] = byte(rng.Intn(256))
		}
	}
	return b
}

// xzCLI compresses with the xz program (the reference implementation);
// tests that need it skip without it.
func xzCLI(t *testing.T, in []byte, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("xz")
	if err != nil {
		t.Skip("xz (xz-utils) not installed: no reference encoder for BCJ streams")
	}
	cmd := exec.Command(bin, append([]string{"-z", "-c", "-T1"}, args...)...)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz %v: %v", args, err)
	}
	return out
}

func TestDecodeXZReferenceStreams(t *testing.T) {
	in := x86ish(1<<20 + 7)
	if self, err := os.ReadFile(os.Args[0]); err == nil && len(self) > 1<<20 {
		in = append(in, self[:1<<20]...) // real x86-64 code too
	}
	for _, args := range [][]string{
		{"--check=crc32", "--x86", "--lzma2=preset=1,dict=1MiB"}, // the kernel's xz_wrap.sh, at a faster preset
		{"--check=crc64", "-1", "--block-size=300KiB"},           // many blocks, like data.tar.xz
		{"--check=sha256", "--x86", "--lzma2=preset=1", "--block-size=1MiB"},
		{"--check=none", "-0"},
	} {
		comp := xzCLI(t, in, args...)
		out, err := decodeXZ(comp, 64<<20)
		if err != nil || !bytes.Equal(out, in) {
			t.Errorf("decodeXZ %v: %d bytes, %v", args, len(out), err)
			continue
		}
		r, err := newXZReader(comp, 64<<20, 3)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, in) {
			t.Errorf("newXZReader %v: %d bytes, %v", args, len(got), err)
		}
	}
}

func TestDecodeXZPureGo(t *testing.T) {
	in := x86ish(200 << 10)
	var b bytes.Buffer
	w, err := xz.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(in)
	w.Close()
	out, err := decodeXZ(b.Bytes(), 1<<20)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("decodeXZ: %d bytes, %v", len(out), err)
	}
	if _, err := decodeXZ(b.Bytes(), 1000); err == nil {
		t.Fatal("limit not enforced")
	}
}

func TestDecodeXZCorrupt(t *testing.T) {
	in := x86ish(100 << 10)
	var b bytes.Buffer
	w, _ := xz.NewWriter(&b)
	w.Write(in)
	w.Close()
	good := b.Bytes()
	for _, off := range []int{0, 7, 13, len(good) / 2, len(good) - 20, len(good) - 3} {
		bad := bytes.Clone(good)
		bad[off] ^= 0x55
		if out, err := decodeXZ(bad, 1<<20); err == nil && !bytes.Equal(out, in) {
			t.Errorf("corruption at %d went unnoticed", off)
		}
	}
	for _, n := range []int{0, 10, 31, len(good) - 1} {
		if _, err := decodeXZ(good[:n], 1<<20); err == nil {
			t.Errorf("truncated to %d bytes: no error", n)
		}
	}
	r, err := newXZReader(good, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // closing early must not leak a blocked producer
}

func TestBCJShortBuffers(t *testing.T) {
	for n := 0; n <= 5; n++ {
		b := bytes.Repeat([]byte{0xe8}, n)
		bcjX86Decode(b) // must not panic or read past the end
	}
}

func FuzzDecodeXZ(f *testing.F) {
	var b bytes.Buffer
	w, _ := xz.NewWriter(&b)
	w.Write([]byte("hello hello hello"))
	w.Close()
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeXZ(data, 1<<20)
	})
}
