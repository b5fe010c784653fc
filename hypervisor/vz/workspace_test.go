package vz

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestStripSetID(t *testing.T) {
	dir := t.TempDir()
	files := []struct {
		name  string
		mode  fs.FileMode
		want  fs.FileMode
		strip bool
		why   string
	}{
		{"suid", 0o755 | fs.ModeSetuid, 0o755, true, "a guest-planted setuid file runs as the owner for anyone"},
		{"sgid", 0o750 | fs.ModeSetgid, 0o750, true, "setgid likewise, as the group"},
		{"sub/both", 0o700 | fs.ModeSetuid | fs.ModeSetgid, 0o700, true, "in a subdirectory too"},
		{"plain", 0o644, 0o644, false, "other files keep their mode"},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	changed, err := stripSetID(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != f.want {
			t.Errorf("%s: mode %v, want %v (%s)", f.name, st.Mode(), f.want, f.why)
		}
		if f.strip {
			n++
		}
	}
	if len(changed) != n {
		t.Errorf("changed %v, want %d files", changed, n)
	}
}
