package sqliteexport

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// fuzzDeadline is how long one file may take to be read whole: the seeds
// take milliseconds, so a file that takes longer is one that hangs the
// reader, and fails rather than stalls the fuzzer.
const fuzzDeadline = 10 * time.Second

// compactExport is a genuine export of every kind of event rewritten with
// 512-byte pages (VACUUM): the same file format, a few dozen KiB instead
// of the exporter's 8 KiB pages, which the fuzzer mutates far faster.
func compactExport(tb testing.TB, opt Options, edits ...string) []byte {
	tb.Helper()
	path := editedCopy(tb, genuineExport(tb, opt), append([]string{"PRAGMA page_size = 512", "VACUUM"}, edits...)...)
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzReader writes each input as a file and reads it as capsem ui
// --sqlite and inspect --sqlite do: open it, list its sessions, read each
// one's record and its events. A file is refused or read; the reader never
// panics, never takes longer than fuzzDeadline, and never returns more
// text than a small multiple of the file's size (a row handed out twice, a
// computed column, a view, would).
func FuzzReader(f *testing.F) {
	plain := compactExport(f, Options{})
	seed := filepath.Join(f.TempDir(), "seed.db")
	if err := os.WriteFile(seed, plain, 0o600); err != nil {
		f.Fatal(err)
	}
	r, err := OpenReader(seed)
	if err != nil || readWhole(seed) == 0 {
		f.Fatalf("the genuine seed (%d bytes) does not read: %v", len(plain), err)
	}
	r.Close()
	f.Add(plain)
	f.Add(compactExport(f, Options{Scrub: true}))
	f.Add(compactExport(f, Options{}, `CREATE VIEW v AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r`))
	f.Add(plain[:len(plain)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		go func() { done <- readWhole(path) }()
		select {
		case n := <-done:
			if limit := 4*len(data) + 1<<20; n > limit {
				t.Fatalf("read %d bytes of text from a file of %d bytes (limit %d)", n, len(data), limit)
			}
		case <-time.After(fuzzDeadline):
			t.Fatalf("reading a file of %d bytes took more than %v", len(data), fuzzDeadline)
		}
	})
}

// readWhole reads everything the reader gives of the file at path and
// returns how many bytes of text that was; errors end the reading.
func readWhole(path string) int {
	r, err := OpenReader(path)
	if err != nil {
		return 0
	}
	defer r.Close()
	sessions, err := r.Sessions()
	if err != nil {
		return 0
	}
	n := textBytes(reflect.ValueOf(sessions))
	for _, s := range sessions {
		one, err := r.Session(s.ID)
		if err != nil {
			continue
		}
		n += textBytes(reflect.ValueOf(one))
		r.Events(s.ID, func(ev store.Event) error {
			n += textBytes(reflect.ValueOf(ev))
			return nil
		})
	}
	return n
}

// textBytes is the length of every string in v, followed through
// pointers, package store's structs, slices and maps (a time or an
// address holds no text of the file).
func textBytes(v reflect.Value) int {
	switch v.Kind() {
	case reflect.String:
		return v.Len()
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return textBytes(v.Elem())
	case reflect.Struct:
		if v.Type().PkgPath() != reflect.TypeFor[store.Event]().PkgPath() {
			return 0
		}
		n := 0
		for i := range v.NumField() {
			n += textBytes(v.Field(i))
		}
		return n
	case reflect.Slice, reflect.Array:
		n := 0
		for i := range v.Len() {
			n += textBytes(v.Index(i))
		}
		return n
	case reflect.Map:
		n := 0
		for it := v.MapRange(); it.Next(); {
			n += textBytes(it.Key()) + textBytes(it.Value())
		}
		return n
	}
	return 0
}
