package image

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsem/capsem/guest/arch"
)

func TestRootfsKey(t *testing.T) {
	base := DefaultRootfs
	if err := base.check(); err != nil {
		t.Fatal(err)
	}
	k := base.Key()
	if len(k) != 32 || k != DefaultRootfs.Key() {
		t.Fatalf("key %q is not stable", k)
	}
	clone := func() RootfsRecipe {
		r := base
		r.Mirrors = append([]string(nil), base.Mirrors...)
		r.Packages = append([]string(nil), base.Packages...)
		r.DpkgPaths = append([]string(nil), base.DpkgPaths...)
		r.Tools = append([]NPMTool(nil), base.Tools...)
		return r
	}
	if r := clone(); r.Key() != k || !reflect.DeepEqual(r, base) {
		t.Fatal("a copy of the recipe has another key")
	}
	changes := map[string]func(*RootfsRecipe){
		"suite":       func(r *RootfsRecipe) { r.Suite = "trixie" },
		"variant":     func(r *RootfsRecipe) { r.Variant = "apt" },
		"mirror":      func(r *RootfsRecipe) { r.Mirrors[0] += " contrib" },
		"package":     func(r *RootfsRecipe) { r.Packages = append(r.Packages, "vim") },
		"order":       func(r *RootfsRecipe) { r.Packages[0], r.Packages[1] = r.Packages[1], r.Packages[0] },
		"dpkg path":   func(r *RootfsRecipe) { r.DpkgPaths = r.DpkgPaths[1:] },
		"node":        func(r *RootfsRecipe) { r.Node.Version = "22.0.0" },
		"tool pin":    func(r *RootfsRecipe) { r.Tools[0].Version = "0.0.1" },
		"tool gone":   func(r *RootfsRecipe) { r.Tools = r.Tools[1:] },
		"compression": func(r *RootfsRecipe) { r.Compression = "lz4" },
		// An entry moved from one list to the next must not keep the key.
		"moved": func(r *RootfsRecipe) {
			r.DpkgPaths = append([]string{r.Packages[len(r.Packages)-1]}, r.DpkgPaths...)
			r.Packages = r.Packages[:len(r.Packages)-1]
		},
	}
	seen := map[string]string{k: "default"}
	for name, change := range changes {
		r := clone()
		change(&r)
		got := r.Key()
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: key %s is the same as %s's", name, got, prev)
		}
		seen[got] = name
	}
}

func TestRootfsRecipeCheck(t *testing.T) {
	for name, change := range map[string]func(*RootfsRecipe){
		"latest":     func(r *RootfsRecipe) { r.Tools = []NPMTool{{Package: "x", Version: "latest"}} },
		"range":      func(r *RootfsRecipe) { r.Tools = []NPMTool{{Package: "x", Version: "^1.2.3"}} },
		"no version": func(r *RootfsRecipe) { r.Node.Version = "" },
		"comma":      func(r *RootfsRecipe) { r.Packages = []string{"a,b"} },
		"no mirror":  func(r *RootfsRecipe) { r.Mirrors = nil },
	} {
		r := DefaultRootfs
		change(&r)
		if err := r.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, tool := range append([]NPMTool{DefaultRootfs.Node}, DefaultRootfs.Tools...) {
		if tool.Command == "" {
			t.Errorf("%s: no command to check", tool)
		}
	}
}

func TestStripSetid(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode fs.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if mode.IsDir() {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode&^fs.ModeDir); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/bin/su", 0o4755|fs.ModeSetuid)
	mk("usr/bin/wall", 0o2755|fs.ModeSetgid)
	mk("usr/bin/both", 0o755|fs.ModeSetuid|fs.ModeSetgid)
	mk("usr/bin/plain", 0o755)
	mk("var/mail", fs.ModeDir|fs.ModeSetgid|0o775)
	mk("tmp", fs.ModeDir|fs.ModeSticky|0o777)
	if err := os.Symlink("su", filepath.Join(root, "usr/bin/su-link")); err != nil {
		t.Fatal(err)
	}
	found, err := FindSetid(root)
	if err != nil {
		t.Fatal(err)
	}
	// A non-root user cannot set setgid for a group it is not in; the
	// kernel then clears it silently. Expect only what took.
	var want []string
	for _, rel := range []string{"/usr/bin/both", "/usr/bin/su", "/usr/bin/wall", "/var/mail"} {
		st, _ := os.Stat(filepath.Join(root, rel))
		if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			want = append(want, rel)
		}
	}
	if !reflect.DeepEqual(found, want) || len(want) < 2 {
		t.Fatalf("FindSetid = %v, want %v", found, want)
	}
	stripped, err := StripSetid(root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stripped, want) {
		t.Errorf("StripSetid = %v, want %v", stripped, want)
	}
	if left, _ := FindSetid(root); len(left) != 0 {
		t.Errorf("left: %v", left)
	}
	for rel, mode := range map[string]fs.FileMode{
		"usr/bin/su": 0o755, "usr/bin/wall": 0o755, "usr/bin/both": 0o755, "usr/bin/plain": 0o755,
		"var/mail": fs.ModeDir | 0o775, "tmp": fs.ModeDir | fs.ModeSticky | 0o777,
	} {
		st, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", rel, st.Mode(), mode)
		}
	}
	if again, err := StripSetid(root); err != nil || len(again) != 0 {
		t.Errorf("second strip: %v, %v", again, err)
	}
}

func TestCheckStaticAgent(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	static := testELF(elf.ET_EXEC, elfNote("Go", 4, []byte("id")), nil)
	if err := CheckStaticAgent(write("static", static), arch.AMD64); err != nil {
		t.Fatalf("static binary: %v", err)
	}
	// The same file with its one segment turned into PT_INTERP.
	dynamic := bytes.Clone(static)
	binary.LittleEndian.PutUint32(dynamic[64:], uint32(elf.PT_INTERP))
	err := CheckStaticAgent(write("dynamic", dynamic), arch.AMD64)
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("dynamic binary: %v", err)
	}
	arm := bytes.Clone(static)
	binary.LittleEndian.PutUint16(arm[18:], uint16(elf.EM_AARCH64))
	if err := CheckStaticAgent(write("arm", arm), arch.AMD64); err == nil || !strings.Contains(err.Error(), "the guest is amd64") {
		t.Errorf("arm64 binary for an amd64 guest: %v", err)
	}
	if err := CheckStaticAgent(write("arm", arm), arch.ARM64); err != nil {
		t.Errorf("arm64 binary for an arm64 guest: %v", err)
	}
	if err := CheckStaticAgent(write("static", static), arch.ARM64); err == nil || !strings.Contains(err.Error(), "GOARCH=arm64") {
		t.Errorf("x86-64 binary for an arm64 guest: %v, want the build command for arm64", err)
	}
	if err := CheckStaticAgent(write("script", []byte("#!/bin/sh\n")), arch.AMD64); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("script: %v", err)
	}
	if err := CheckStaticAgent(filepath.Join(dir, "missing"), arch.AMD64); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing: %v", err)
	}
	if err := CheckStaticAgent("", arch.AMD64); err == nil {
		t.Error("empty path accepted")
	}
}

func TestTailWriter(t *testing.T) {
	w := newTail(2)
	w.Write([]byte("one\ntwo\nthr"))
	w.Write([]byte("ee\nfour"))
	if got := w.String(); got != "  three\n  four" {
		t.Errorf("tail = %q", got)
	}
	if got := newTail(3).String(); !strings.Contains(got, "no output") {
		t.Errorf("empty tail = %q", got)
	}
}
