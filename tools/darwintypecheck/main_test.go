package main

import (
	"os/exec"
	"strings"
	"testing"
)

// checkMod checks patterns of testdata/mod for darwin/arm64 with tags.
func checkMod(t *testing.T, tags string, patterns ...string) *report {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	r, err := check("testdata/mod", target{GOOS: "darwin", GOARCH: "arm64", Tags: tags, Tests: true}, patterns)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestClean(t *testing.T) {
	r := checkMod(t, "vz", "./good")
	if len(r.Errors) > 0 {
		t.Fatalf("errors: %q", r.Errors)
	}
	if len(r.Full) != 2 || len(r.Cgo) != 2 { // good and its test variant; cgolib and runtime/cgo
		t.Errorf("checked in full %q, cgo %q", r.Full, r.Cgo)
	}
}

// TestFails proves that the check can fail: a type error, an expression
// whose C type it cannot check, a type error only in the tagged build,
// and a named package that imports C each fail it.
func TestFails(t *testing.T) {
	for _, c := range []struct {
		tags, pkg, want string
	}{
		{"", "./bad", "bad.go:5:13: cannot use cgolib.Name() (value of type string) as int value"},
		{"", "./leak", "leak.go:6:16: cgolib.Count() has a type involving C"},
		{"vz", "./tagged", "tagged_darwin.go:5:16: cannot use N (variable of type int) as string value"},
		{"", "./cgolib", "example.com/m/cgolib: imports C: its C expressions cannot be checked here"},
	} {
		r := checkMod(t, c.tags, c.pkg)
		if len(r.Errors) == 0 || !strings.Contains(strings.Join(r.Errors, "\n"), c.want) {
			t.Errorf("%s (tags %q): errors %q, want %q", c.pkg, c.tags, r.Errors, c.want)
		}
	}
	if r := checkMod(t, "", "./tagged"); len(r.Errors) > 0 {
		t.Errorf("./tagged without the tag: %q", r.Errors)
	}
}
