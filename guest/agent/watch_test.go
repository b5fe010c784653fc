//go:build linux

package agent

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

type watchRig struct {
	t    *testing.T
	root string
	w    *Watcher
	mu   sync.Mutex
	got  []proto.FileEvent
}

func newWatchRig(t *testing.T, delay time.Duration) *watchRig {
	t.Helper()
	r := &watchRig{t: t, root: t.TempDir()}
	return r.start(delay)
}

func (r *watchRig) start(delay time.Duration) *watchRig {
	w, err := NewWatcher(r.root, delay, func(ev proto.FileEvent) {
		r.mu.Lock()
		r.got = append(r.got, ev)
		r.mu.Unlock()
	})
	if err != nil {
		r.t.Fatal(err)
	}
	r.w = w
	r.t.Cleanup(func() { w.Close() })
	return r
}

func (r *watchRig) p(rel string) string { return filepath.Join(r.root, rel) }

// flush returns the events reported up to now, described.
func (r *watchRig) flush() []string {
	r.w.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.got {
		out = append(out, describe(ev))
	}
	r.got = nil
	return out
}

func (r *watchRig) expect(want ...string) {
	r.t.Helper()
	got := r.flush()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		r.t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatchCreateModifyDelete(t *testing.T) {
	r := newWatchRig(t, time.Hour) // only Flush emits
	must(t, os.WriteFile(r.p("a.txt"), []byte("12345"), 0o644))
	r.expect("created a.txt 5")
	f, err := os.OpenFile(r.p("a.txt"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	for i := 0; i < 1000; i++ { // a thousand writes, one event
		f.Write([]byte("x"))
	}
	f.Close()
	r.expect("modified a.txt 1005")
	must(t, os.Remove(r.p("a.txt")))
	r.expect("deleted a.txt")
}

func TestWatchCoalescing(t *testing.T) {
	r := newWatchRig(t, time.Hour)
	// Created then written: one "created" with the final size.
	must(t, os.WriteFile(r.p("f"), nil, 0o644))
	must(t, os.WriteFile(r.p("f"), []byte("final"), 0o644))
	// Created and deleted within the delay: nothing.
	must(t, os.WriteFile(r.p("tmp"), []byte("x"), 0o644))
	must(t, os.Remove(r.p("tmp")))
	// Created, then renamed: created under the new name.
	must(t, os.WriteFile(r.p("draft"), []byte("d"), 0o644))
	must(t, os.Rename(r.p("draft"), r.p("doc")))
	r.expect("created f 5", "created doc 1")
	// An existing file replaced (deleted, created again): modified.
	must(t, os.Remove(r.p("f")))
	must(t, os.WriteFile(r.p("f"), []byte("new content"), 0o644))
	r.expect("modified f 11")
	// Renamed, then the new name deleted: the old name was deleted.
	must(t, os.Rename(r.p("doc"), r.p("doc2")))
	must(t, os.Remove(r.p("doc2")))
	r.expect("deleted doc")
}

func TestWatchNewSubdirectory(t *testing.T) {
	r := newWatchRig(t, time.Hour)
	// Created faster than a watch could be added: the scan finds it all.
	must(t, os.MkdirAll(r.p("a/b/c"), 0o755))
	must(t, os.WriteFile(r.p("a/b/c/deep.txt"), []byte("deep"), 0o644))
	r.expect("created a dir", "created a/b dir", "created a/b/c dir", "created a/b/c/deep.txt 4")
	// The new directories are watched now.
	must(t, os.WriteFile(r.p("a/b/later.txt"), []byte("l"), 0o644))
	r.expect("created a/b/later.txt 1")
	// A directory renamed: its watches follow it.
	must(t, os.Rename(r.p("a/b"), r.p("a/bb")))
	r.expect("renamed a/bb dir from a/b")
	must(t, os.WriteFile(r.p("a/bb/c/after-rename.txt"), []byte("ar"), 0o644))
	r.expect("created a/bb/c/after-rename.txt 2")
	// Removed recursively.
	must(t, os.RemoveAll(r.p("a/bb")))
	got := r.flush()
	if len(got) == 0 || got[len(got)-1] != "deleted a/bb dir" {
		t.Fatalf("rm -r: %q", got)
	}
}

func TestWatchMovesAcrossTheBoundary(t *testing.T) {
	outside := t.TempDir()
	r := newWatchRig(t, time.Hour)
	must(t, os.Mkdir(r.p("d"), 0o755))
	must(t, os.WriteFile(r.p("d/x"), []byte("x"), 0o644))
	r.flush()
	// Moved out: deleted, and its watch is dropped.
	must(t, os.Rename(r.p("d"), filepath.Join(outside, "d")))
	r.expect("deleted d dir")
	must(t, os.WriteFile(filepath.Join(outside, "d", "y"), []byte("y"), 0o644))
	r.expect()
	// Moved in: created, with its contents, and watched.
	must(t, os.MkdirAll(filepath.Join(outside, "in/sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "in/sub/z"), []byte("zz"), 0o644))
	must(t, os.Rename(filepath.Join(outside, "in"), r.p("in")))
	r.expect("created in dir", "created in/sub dir", "created in/sub/z 2")
	must(t, os.WriteFile(r.p("in/sub/w"), nil, 0o644))
	r.expect("created in/sub/w 0")
	// A file moved out.
	must(t, os.Rename(r.p("in/sub/z"), filepath.Join(outside, "z")))
	r.expect("deleted in/sub/z")
}

func TestWatchExistingTreeAndDelay(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "pre/existing"), 0o755))
	r := &watchRig{t: t, root: root}
	r.start(30 * time.Millisecond)
	must(t, os.WriteFile(r.p("pre/existing/f"), []byte("abc"), 0o644))
	// Without Flush, the delay emits it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.got)
		r.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no event after the delay")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.expect("created pre/existing/f 3")
}

func TestWatchErrors(t *testing.T) {
	if _, err := NewWatcher("/nonexistent/dir", time.Second, func(proto.FileEvent) {}); err == nil {
		t.Fatal("watching a missing directory succeeded")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := NewWatcher(f, time.Second, func(proto.FileEvent) {}); err == nil {
		t.Fatal("watching a file succeeded")
	}
	// Close twice, Flush after Close: no hang.
	w, err := NewWatcher(t.TempDir(), time.Second, func(proto.FileEvent) {})
	must(t, err)
	w.Close()
	w.Close()
	w.Flush()
}
