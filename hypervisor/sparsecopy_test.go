//go:build unix

package hypervisor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	chunks := map[int64][]byte{
		0:             bytes.Repeat([]byte{1}, 4096),
		10<<20 + 17:   []byte("an unaligned write across nothing"),
		32 << 20:      make([]byte, 1<<20), // written zeros: data, not a hole
		size - 3:      []byte("end"),
		40<<20 + 4096: bytes.Repeat([]byte("x"), 300<<10),
	}
	for off, b := range chunks {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	dst := filepath.Join(dir, "dst")
	os.WriteFile(dst, []byte("an old file is replaced"), 0o644)
	n, err := CopySparse(dst, src, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(dst)
	if !bytes.Equal(a, b) {
		t.Fatal("the copy differs from the source")
	}
	st, _ := os.Stat(dst)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if n > 2<<20 {
		t.Errorf("wrote %d bytes: the zeros and holes were copied", n)
	}
}
