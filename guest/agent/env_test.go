package agent

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestBuildEnv(t *testing.T) {
	got, err := BuildEnv([]string{"PATH=/bin", "HOME=/root", "SHELL=/bin/sh"}, []string{"TERM=xterm", "PATH=/opt/bin", "X=a=b", "TERM=vt100"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/opt/bin", "HOME=/root", "SHELL=/bin/sh", "TERM=vt100", "X=a=b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"NOEQUALS", "=v", "K=a\x00b"} {
		if _, err := BuildEnv(nil, []string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if Getenv(want, "PATH") != "/opt/bin" || Getenv(want, "NOPE") != "" {
		t.Fatal("Getenv")
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "data"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(bin, "sub"), 0o755)

	if p, err := LookPath("tool", "/nonexistent:"+bin, ""); err != nil || p != filepath.Join(bin, "tool") {
		t.Fatalf("tool: %q %v", p, err)
	}
	if _, err := LookPath("data", bin, ""); !errors.Is(err, ErrNotExecutable) || ExitCodeFor(err) != 126 {
		t.Fatalf("data: %v", err)
	}
	if _, err := LookPath("sub", bin, ""); !errors.Is(err, ErrNotExecutable) {
		t.Fatalf("directory: %v", err)
	}
	if _, err := LookPath("missing", bin, ""); !errors.Is(err, ErrNotFound) || ExitCodeFor(err) != 127 {
		t.Fatalf("missing: %v", err)
	}
	if _, err := LookPath("", bin, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty: %v", err)
	}
	// A name with a slash is taken as is, relative to the working directory.
	if p, err := LookPath("bin/tool", "", dir); err != nil || p != "bin/tool" {
		t.Fatalf("relative: %q %v", p, err)
	}
	if _, err := LookPath("./nope", "", dir); !errors.Is(err, ErrNotFound) {
		t.Fatalf("relative missing: %v", err)
	}
	// An empty PATH element is the working directory.
	if p, err := LookPath("tool", ":", bin); err != nil || p != filepath.Join(bin, "tool") {
		t.Fatalf("empty element: %q %v", p, err)
	}
}
