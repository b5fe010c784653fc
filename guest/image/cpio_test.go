package image

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

type cpioRec struct {
	name         string
	ino, mode    uint32
	uid, gid     uint32
	mtime        uint32
	rmaj, rmin   uint32
	data         []byte
	nlink, check uint32
}

// readNewc parses a newc archive strictly (magic, hex fields, 4-byte
// alignment, the trailer last), as the kernel's unpacker does.
func readNewc(t *testing.T, b []byte) []cpioRec {
	t.Helper()
	var out []cpioRec
	off := 0
	align := func() { off = (off + 3) &^ 3 }
	for {
		if off+110 > len(b) {
			t.Fatalf("truncated header at %d", off)
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], off)
		}
		f := func(i int) uint32 {
			v, err := strconv.ParseUint(string(h[6+8*i:6+8*i+8]), 16, 32)
			if err != nil {
				t.Fatalf("bad hex field %d at %d", i, off)
			}
			return uint32(v)
		}
		r := cpioRec{ino: f(0), mode: f(1), uid: f(2), gid: f(3), nlink: f(4), mtime: f(5), rmaj: f(9), rmin: f(10), check: f(12)}
		size, namesize := int(f(6)), int(f(11))
		off += 110
		r.name = string(b[off : off+namesize-1])
		if b[off+namesize-1] != 0 {
			t.Fatalf("name %q not NUL-terminated", r.name)
		}
		off += namesize
		align()
		r.data = b[off : off+size]
		off += size
		align()
		if r.name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, r)
	}
}

func sampleInitramfs(t *testing.T, src string, reverse bool) *Initramfs {
	t.Helper()
	r := NewInitramfs()
	steps := []func() error{
		func() error { return r.AddFile("init", 0o755, []byte("#!/bin/init\n")) },
		func() error { return r.AddFileFrom("/lib/modules/virtio.ko", 0o644, src) },
		func() error { return r.AddSymlink("bin/sh", "/init") },
		func() error { return r.AddCharDev("dev/console", 0o600, 5, 1) },
		func() error { return r.AddDir("tmp", 0o777|fs.ModeSticky) },
		func() error { return r.AddFile("empty", 0o644, nil) },
	}
	if reverse {
		for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
			steps[i], steps[j] = steps[j], steps[i]
		}
	}
	for _, s := range steps {
		if err := s(); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestInitramfsReproducible(t *testing.T) {
	src := filepath.Join(t.TempDir(), "m.ko")
	if err := os.WriteFile(src, []byte("module bytes, odd length"), 0o600); err != nil {
		t.Fatal(err)
	}
	var a, b, gz1, gz2 bytes.Buffer
	if err := sampleInitramfs(t, src, false).Write(&a, None); err != nil {
		t.Fatal(err)
	}
	// Different insertion order, different host file times: same bytes.
	os.Chtimes(src, testTime, testTime)
	if err := sampleInitramfs(t, src, true).Write(&b, None); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("same entries gave different archives")
	}
	sampleInitramfs(t, src, false).Write(&gz1, Gzip)
	sampleInitramfs(t, src, true).Write(&gz2, Gzip)
	if !bytes.Equal(gz1.Bytes(), gz2.Bytes()) {
		t.Fatal("same entries gave different gzip archives")
	}
	zr, err := gzip.NewReader(&gz1)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, a.Bytes()) {
		t.Fatal("gzip archive does not decompress to the plain one")
	}
}

func TestInitramfsLayout(t *testing.T) {
	src := filepath.Join(t.TempDir(), "m.ko")
	os.WriteFile(src, []byte("KO"), 0o600)
	var buf bytes.Buffer
	if err := sampleInitramfs(t, src, false).Write(&buf, None); err != nil {
		t.Fatal(err)
	}
	recs := readNewc(t, buf.Bytes())
	want := []struct {
		name string
		mode uint32
		data string
	}{
		{".", 0o040755, ""},
		{"bin", 0o040755, ""},
		{"bin/sh", 0o120777, "/init"},
		{"dev", 0o040755, ""},
		{"dev/console", 0o020600, ""},
		{"empty", 0o100644, ""},
		{"init", 0o100755, "#!/bin/init\n"},
		{"lib", 0o040755, ""},
		{"lib/modules", 0o040755, ""},
		{"lib/modules/virtio.ko", 0o100644, "KO"},
		{"tmp", 0o041777, ""},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(recs), len(want), recs)
	}
	for i, w := range want {
		r := recs[i]
		if r.name != w.name || r.mode != w.mode || string(r.data) != w.data {
			t.Errorf("entry %d: %q %o %q, want %q %o %q", i, r.name, r.mode, r.data, w.name, w.mode, w.data)
		}
		if r.ino != uint32(i+1) || r.uid != 0 || r.gid != 0 || r.mtime != 0 {
			t.Errorf("%s: ino %d uid %d gid %d mtime %d: want sequential inode, zero ids and time", r.name, r.ino, r.uid, r.gid, r.mtime)
		}
	}
	if c := recs[4]; c.rmaj != 5 || c.rmin != 1 {
		t.Errorf("dev/console is %d:%d, want 5:1", c.rmaj, c.rmin)
	}
}

func TestInitramfsErrors(t *testing.T) {
	r := NewInitramfs()
	if err := r.AddFile("a", 0o644, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.AddFile("/a", 0o644, nil); err == nil {
		t.Error("a file added twice")
	}
	if err := r.AddFile("a/b", 0o644, nil); err == nil {
		t.Error("a file under a regular file")
	}
	if err := r.AddDir("/", 0o755); err == nil {
		t.Error("/ accepted as an entry")
	}
	if err := r.AddFileFrom("x", 0o644, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing source accepted")
	}
	if err := r.AddDir("d", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.AddDir("d", 0o755); err != nil {
		t.Errorf("re-adding a directory: %v", err)
	}
	if err := r.Write(io.Discard, "bzip9"); err == nil {
		t.Error("unknown compression accepted")
	}
	// ../ cannot escape the archive root.
	if err := r.AddFile("../../etc/passwd", 0o644, nil); err != nil {
		t.Fatal(err)
	}
	if ps := r.Paths(); ps[len(ps)-1] != "etc/passwd" {
		t.Errorf("paths: %v", ps)
	}
}

func TestInitramfsWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "initrd")
	r := NewInitramfs()
	r.AddFile("init", 0o755, []byte("x"))
	if err := r.WriteFile(p, None); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if recs := readNewc(t, b); len(recs) != 2 {
		t.Fatalf("entries: %+v", recs)
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}
