package image

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var testTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

func TestKey(t *testing.T) {
	if Key("ab", "c") == Key("a", "bc") {
		t.Fatal("Key does not separate its parts")
	}
	if Key("x") != Key("x") || len(Key("x")) != 32 {
		t.Fatalf("Key(x) = %q", Key("x"))
	}
}

func TestDefaultCacheRoot(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if r, _ := DefaultCacheRoot(); r != "/xdg/capsem" {
		t.Fatalf("root = %s", r)
	}
	t.Setenv("XDG_CACHE_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if r, _ := DefaultCacheRoot(); r != "/home/u/.cache/capsem" {
		t.Fatalf("root with a relative XDG_CACHE_HOME = %s", r)
	}
	c := &Cache{Root: "/r"}
	if c.Downloads() != "/r/downloads" || c.Dir("kernel", "k") != "/r/images/kernel/k" {
		t.Fatalf("layout: %s %s", c.Downloads(), c.Dir("kernel", "k"))
	}
}

func TestEnsure(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	builds := 0
	build := func(dir string) error {
		builds++
		return os.WriteFile(filepath.Join(dir, "out"), []byte("v1"), 0o644)
	}
	d1, err := c.Ensure("thing", Key("in"), build)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := c.Ensure("thing", Key("in"), build)
	if err != nil || d1 != d2 || builds != 1 {
		t.Fatalf("second Ensure: %s %v, %d builds", d2, err, builds)
	}
	if b, _ := os.ReadFile(filepath.Join(d1, "out")); string(b) != "v1" {
		t.Fatalf("artefact: %q", b)
	}
	// A failed build caches nothing and leaves no temporary directory.
	if _, err := c.Ensure("thing", Key("bad"), func(string) error { return errors.New("boom") }); err == nil {
		t.Fatal("failed build succeeded")
	}
	if _, ok := c.Lookup("thing", Key("bad")); ok {
		t.Fatal("failed build was cached")
	}
	ents, _ := os.ReadDir(filepath.Join(c.Images(), "thing"))
	if len(ents) != 1 {
		t.Fatalf("cache dir holds %d entries, want 1", len(ents))
	}
	if _, err := c.Ensure("../x", "k", build); err == nil {
		t.Fatal("bad kind accepted")
	}
}

func TestEnsureRace(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirs[i], errs[i] = c.Ensure("race", "k", func(dir string) error {
				time.Sleep(20 * time.Millisecond)
				return os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
			})
		}()
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Fatalf("builder %d: %s, %v", i, dirs[i], errs[i])
		}
	}
	ents, _ := os.ReadDir(filepath.Join(c.Images(), "race"))
	if len(ents) != 1 {
		t.Fatalf("%d entries after the race, want 1", len(ents))
	}
}

func TestEnsureSweepsStaleBuilds(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	stale := filepath.Join(c.Images(), "k", ".build-old-1")
	fresh := filepath.Join(c.Images(), "k", ".build-new-1")
	os.MkdirAll(stale, 0o755)
	os.MkdirAll(fresh, 0o755)
	os.Chtimes(stale, testTime, testTime)
	if _, err := c.Ensure("k", "x", func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale build directory not removed")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("a build in progress was removed")
	}
}
