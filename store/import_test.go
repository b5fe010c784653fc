package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestImportCopiesASessionExactly(t *testing.T) {
	dir := t.TempDir()
	src, err := Open(filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := src.Begin(Session{Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		w.Append(Event{FS: &FS{Action: FSCreated, Path: "f", Size: int64(i)}})
	}
	w.Append(Event{Exec: &Exec{Argv: []string{"true"}, ExitCode: 0}})
	code := 3
	if err := w.End(&code); err != nil {
		t.Fatal(err)
	}
	id := w.ID()

	dst, err := Open(filepath.Join(dir, "main"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	// Twice: an import that is repeated (after a crash) gives the same result.
	for range 2 {
		if err := dst.Import(src, id); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := src.Session(id)
	got, err := dst.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExitCode == nil || *got.ExitCode != 3 || !got.EndedAt.Equal(want.EndedAt) || got.Counts.Events != 1001 {
		t.Fatalf("imported session %+v, want %+v", got, want)
	}
	var n int
	var last Event
	if err := dst.Events(id, func(e Event) error { n++; last = e; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 1001 || last.Seq != 1001 || last.Exec == nil || last.Exec.Argv[0] != "true" {
		t.Fatalf("imported %d events, last %+v", n, last)
	}
	src.Close()
	if err := dst.Import(src, id); err == nil {
		t.Error("import from a closed store succeeded")
	}
}

// TestImportRefusedOnALowDisk: a session is not moved into a store whose
// disk it would leave below the reserve; it stays where it is.
func TestImportRefusedOnALowDisk(t *testing.T) {
	dir := t.TempDir()
	src, err := Open(filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w, err := src.Begin(Session{ID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(Event{DNS: &DNS{QName: "x.test"}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	d := newFakeDisk(1 << 30)
	dst, err := OpenWith(filepath.Join(dir, "main"), d.opts(0))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	d.set(100 * MiB)
	if err := dst.Import(src, "r"); err == nil || !strings.Contains(err.Error(), "--min-free-disk") {
		t.Fatalf("Import with 100 MiB free: %v", err)
	}
	if _, err := dst.Session("r"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused session is in the store: %v", err)
	}
	d.set(1 << 30)
	if err := dst.Import(src, "r"); err != nil {
		t.Fatalf("Import with 1 GiB free: %v", err)
	}
}
