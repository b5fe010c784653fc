//go:build linux

package agent

import (
	"cmp"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/proto"
)

type watchRig struct {
	t      *testing.T
	root   string
	budget time.Duration // NewWatcher's; newWatchRig and watchRig{} give InitialScanBudget
	w      *Watcher
	mu     sync.Mutex
	got    []proto.FileEvent
}

func newWatchRig(t *testing.T, delay time.Duration) *watchRig {
	t.Helper()
	r := &watchRig{t: t, root: t.TempDir()}
	return r.start(delay)
}

func (r *watchRig) start(delay time.Duration) *watchRig {
	w, err := NewWatcher(r.root, delay, cmp.Or(r.budget, InitialScanBudget), func(ev proto.FileEvent) {
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
	// Created, then renamed: both (inotify cannot say whether the rename
	// replaced a file, so a rename is never folded into a create).
	must(t, os.WriteFile(r.p("draft"), []byte("d"), 0o644))
	must(t, os.Rename(r.p("draft"), r.p("doc")))
	r.expect("created f 5", "created draft 0", "renamed doc 1 from draft")
	// An existing file replaced (deleted, created again): modified.
	must(t, os.Remove(r.p("f")))
	must(t, os.WriteFile(r.p("f"), []byte("new content"), 0o644))
	r.expect("modified f 11")
	// Renamed, then deleted: both, in order (a rename is never merged
	// into what follows it).
	must(t, os.Rename(r.p("doc"), r.p("doc2")))
	must(t, os.Remove(r.p("doc2")))
	r.expect("renamed doc2 0 from doc", "deleted doc2") // sizes are read when events are sent
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
	if _, err := NewWatcher("/nonexistent/dir", time.Second, InitialScanBudget, func(proto.FileEvent) {}); err == nil {
		t.Fatal("watching a missing directory succeeded")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := NewWatcher(f, time.Second, InitialScanBudget, func(proto.FileEvent) {}); err == nil {
		t.Fatal("watching a file succeeded")
	}
	// Close twice, Flush after Close: no hang.
	w, err := NewWatcher(t.TempDir(), time.Second, InitialScanBudget, func(proto.FileEvent) {})
	must(t, err)
	w.Close()
	w.Close()
	w.Flush()
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// Every watched directory is pinned by a descriptor; they are released as
// directories go and when the watcher closes.
func TestWatchReleasesDescriptors(t *testing.T) {
	before := openFDs(t)
	root := t.TempDir()
	r := &watchRig{t: t, root: root}
	r.start(time.Hour)
	for i := 0; i < 20; i++ {
		must(t, os.MkdirAll(r.p(filepath.Join("d", strings.Repeat("x", i+1))), 0o755))
	}
	r.flush()
	if n := openFDs(t); n < before+21 {
		t.Fatalf("%d descriptors open while watching 21 directories, %d before", n, before)
	}
	must(t, os.RemoveAll(r.p("d")))
	r.flush()
	if n := openFDs(t); n > before+4 {
		t.Fatalf("%d descriptors open after the directories went, %d before", n, before)
	}
	r.w.Close()
	if n := openFDs(t); n != before {
		t.Fatalf("%d descriptors open after Close, %d before", n, before)
	}
}

// A directory renamed within the delay: what happened under its old name is
// reported under that name, then the rename, then what followed under the
// new one — never a child before its parent, never a path that did not
// exist when its event happened.
func TestWatchDirectoryRenameOrder(t *testing.T) {
	r := newWatchRig(t, time.Hour)
	// Each step handled before the next, as when a slow guest runs them.
	for _, step := range []func() error{
		func() error { return os.Mkdir(r.p("a"), 0o755) },
		func() error { return os.Mkdir(r.p("a/b"), 0o755) },
		func() error { return os.Mkdir(r.p("a/b/c"), 0o755) },
		func() error { return os.WriteFile(r.p("a/b/g"), []byte("g"), 0o644) },
		func() error { return os.Rename(r.p("a/b"), r.p("a/bb")) },
		func() error { return os.WriteFile(r.p("a/bb/c/h"), []byte("hh"), 0o644) },
		func() error { return os.Remove(r.p("a/bb/g")) },
	} {
		must(t, step())
		r.w.settle()
	}
	r.expect("created a dir", "created a/b dir", "created a/b/c dir", "created a/b/g 0",
		"renamed a/bb dir from a/b", "created a/bb/c/h 2", "deleted a/bb/g")

	// An existing directory renamed after changes inside it: the changes,
	// then the rename, in the order they happened.
	must(t, os.WriteFile(r.p("a/bb/c/new"), nil, 0o644))
	must(t, os.Rename(r.p("a/bb"), r.p("a/b2")))
	r.expect("created a/bb/c/new 0", "renamed a/b2 dir from a/bb")
}

// Replaying the reported events on the tree as it was must give the tree as
// it is, whatever the operations and however the watcher's reads interleave
// with them.
func TestWatchReplayMatchesTree(t *testing.T) {
	// The watcher handles each operation's events before the next operation:
	// how an agent's commands run (far slower than the watcher). Exact.
	replayTest(t, 200, 1, true)
}

func replayTest(t *testing.T, seeds int64, settleEvery int, probe bool) (diverged, overflows int) {
	lenient := settleEvery > 1
	var trace []string
	if os.Getenv("CAPSEM_WATCH_TRACE") != "" {
		var mu sync.Mutex
		watchTrace = func(f string, a ...any) { mu.Lock(); trace = append(trace, fmt.Sprintf(f, a...)); mu.Unlock() }
		defer func() { watchTrace = nil }()
	}
	for seed := int64(1); seed <= seeds; seed++ {
		r := newWatchRig(t, time.Hour)
		rng := rand.New(rand.NewSource(seed))
		must(t, os.MkdirAll(r.p("base/sub"), 0o755))
		must(t, os.WriteFile(r.p("base/sub/f0"), []byte("x"), 0o644))
		r.flush()
		model := listTree(t, r.root)
		var ops []string
		for i := 0; i < 150; i++ {
			tree := listTree(t, r.root)
			var dirs, files []string
			dirs = append(dirs, "")
			for p, isDir := range tree {
				if isDir {
					dirs = append(dirs, p)
				} else {
					files = append(files, p)
				}
			}
			sort.Strings(dirs)
			sort.Strings(files)
			pick := func(l []string) string { return l[rng.Intn(len(l))] }
			name := func() string { return filepath.Join(pick(dirs), fmt.Sprintf("n%d", rng.Intn(12))) }
			var op string
			switch k := rng.Intn(10); {
			case k < 2:
				p := name()
				op = "mkdir " + p
				os.Mkdir(r.p(p), 0o755)
			case k < 5:
				p := name()
				if len(files) > 0 && rng.Intn(2) == 0 {
					p = pick(files)
				}
				op = "write " + p
				os.WriteFile(r.p(p), []byte(strings.Repeat("y", rng.Intn(50))), 0o644)
			case k < 6 && len(files) > 0:
				p := pick(files)
				op = "rm " + p
				os.Remove(r.p(p))
			case k < 8 && len(files)+len(dirs) > 1:
				src := pick(append(files, dirs[1:]...))
				dst := name()
				op = "mv " + src + " " + dst
				if src != "" && !strings.HasPrefix(dst+"/", src+"/") {
					os.Rename(r.p(src), r.p(dst))
				}
			case k < 9 && len(dirs) > 1:
				p := pick(dirs[1:])
				op = "rm -r " + p
				os.RemoveAll(r.p(p))
			default:
				op = "settle"
			}
			ops = append(ops, op)
			if rng.Intn(settleEvery) == 0 {
				r.w.settle()
			}
		}
		r.w.Flush()
		r.mu.Lock()
		events := r.got
		r.got = nil
		r.mu.Unlock()
		for _, ev := range events {
			applyEvent(model, ev)
		}
		if len(trace) > 0 && !reflect.DeepEqual(model, listTree(t, r.root)) {
			os.WriteFile(os.Getenv("CAPSEM_WATCH_TRACE"), []byte(strings.Join(trace, "\n")+"\n"), 0o644)
		}
		final := listTree(t, r.root)
		overflow := false
		for _, ev := range events {
			overflow = overflow || ev.Action == proto.ActionOverflow
		}
		if lenient && !reflect.DeepEqual(model, final) && !overflow {
			diverged++
		}
		if overflow {
			overflows++
		}
		if !reflect.DeepEqual(model, final) && !lenient {
			var evs []string
			for _, ev := range events {
				evs = append(evs, describe(ev))
			}
			t.Fatalf("seed %d: replayed events give\n%v\nthe tree is\n%v\nops:\n%s\nevents:\n%s", seed, model, final,
				strings.Join(ops, "\n"), strings.Join(evs, "\n"))
		}
		if probe {
			// Whatever the burst did, the watcher is not left blind or
			// confused: a new file in every directory is reported, under
			// its right name.
			var want []string
			for p, isDir := range final {
				if isDir {
					want = append(want, "created "+p+"/probe 0")
				}
			}
			want = append(want, "created probe 0")
			sort.Strings(want)
			for p, isDir := range final {
				if isDir {
					must(t, os.WriteFile(r.p(p+"/probe"), nil, 0o644))
				}
			}
			must(t, os.WriteFile(r.p("probe"), nil, 0o644))
			got := r.flush()
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				if len(trace) > 0 || os.Getenv("CAPSEM_WATCH_TRACE") != "" {
					os.WriteFile(os.Getenv("CAPSEM_WATCH_TRACE"), []byte(strings.Join(trace, "\n")+"\n"), 0o644)
				}
				t.Fatalf("seed %d: after the burst, probes gave\n%s\nwant\n%s", seed, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
		trace = nil
		r.w.Close()
	}
	return diverged, overflows
}

// listTree maps every path under root (relative, slash-separated) to
// whether it is a directory.
func listTree(t *testing.T, root string) map[string]bool {
	m := map[string]bool{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		m[filepath.ToSlash(rel)] = d.IsDir()
		return nil
	})
	return m
}

func applyEvent(m map[string]bool, ev proto.FileEvent) {
	removeUnder := func(p string) {
		for k := range m {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(m, k)
			}
		}
	}
	switch ev.Action {
	case proto.ActionCreated:
		m[ev.Path] = ev.Dir
	case proto.ActionModified:
		m[ev.Path] = false
	case proto.ActionDeleted:
		removeUnder(ev.Path)
	case proto.ActionRenamed:
		moved := map[string]bool{}
		for k, v := range m {
			if k == ev.OldPath || strings.HasPrefix(k, ev.OldPath+"/") {
				moved[ev.Path+k[len(ev.OldPath):]] = v
			}
		}
		removeUnder(ev.OldPath)
		removeUnder(ev.Path)
		for k, v := range moved {
			m[k] = v
		}
		m[ev.Path] = ev.Dir
	}
}

// TestWatchLargeTreeInBackground: a tree that takes longer to watch than
// its budget is watched in the background; NewWatcher returns at
// once, the overflow on "." says when the scan is done (events may have
// been missed meanwhile), and from then on the deepest directory reports.
func TestWatchLargeTreeInBackground(t *testing.T) {
	r := &watchRig{t: t, root: t.TempDir(), budget: time.Nanosecond}
	for i := range 20 {
		must(t, os.MkdirAll(r.p(fmt.Sprintf("d%d/e/f", i)), 0o755))
	}
	start := time.Now()
	r.start(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for !contains(got, "overflow . 0") {
		if time.Now().After(deadline) {
			t.Fatalf("no overflow on . after the background scan: %q", got)
		}
		got = append(got, r.flush()...)
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("background scan of 81 directories done in %v", time.Since(start))
	must(t, os.WriteFile(r.p("d19/e/f/late.txt"), []byte("x"), 0o644))
	r.expect("created d19/e/f/late.txt 1")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
