package image

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cache is capsem's on-disk cache of guest artefacts:
//
//	<Root>/downloads/<file>          fetched inputs (.deb), checked by SHA-256
//	<Root>/images/<kind>/<key>/…     built artefacts, one directory per set of inputs
//
// A key is the hash of everything that went into the artefact (input
// checksums, options, the builder's format version), so a directory is
// never rebuilt in place: new inputs get a new directory, and a finished
// directory is never modified. Directories appear atomically (built under
// a temporary name, then renamed), so a reader sees a whole artefact or
// none, and two builders racing both succeed.
type Cache struct {
	Root string
}

// DefaultCacheRoot is $XDG_CACHE_HOME/capsem, or ~/.cache/capsem.
func DefaultCacheRoot() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "capsem"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set XDG_CACHE_HOME (%w)", err)
	}
	return filepath.Join(h, ".cache", "capsem"), nil
}

// DefaultCache is the cache at DefaultCacheRoot.
func DefaultCache() (*Cache, error) {
	root, err := DefaultCacheRoot()
	if err != nil {
		return nil, err
	}
	return &Cache{Root: root}, nil
}

// Downloads is where fetched inputs are kept.
func (c *Cache) Downloads() string { return filepath.Join(c.Root, "downloads") }

// Images is where built artefacts are kept.
func (c *Cache) Images() string { return filepath.Join(c.Root, "images") }

// Key hashes the inputs of an artefact: each part is length-prefixed, so
// ("ab","c") and ("a","bc") differ. 32 hex digits (128 bits).
func Key(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Dir is where the artefact kind/key lives (whether or not it exists).
func (c *Cache) Dir(kind, key string) string {
	return filepath.Join(c.Images(), kind, key)
}

// Lookup returns the artefact's directory if it has been built.
func (c *Cache) Lookup(kind, key string) (string, bool) {
	d := c.Dir(kind, key)
	st, err := os.Stat(d)
	return d, err == nil && st.IsDir()
}

// staleTemp is how old an abandoned build directory must be before a new
// build removes it.
const staleTemp = time.Hour

// Ensure returns the artefact kind/key, calling build to make it first if
// it is not cached. build fills the empty directory it is given; if it
// fails, nothing is cached.
func (c *Cache) Ensure(kind, key string, build func(dir string) error) (string, error) {
	if err := validName(kind); err != nil {
		return "", err
	}
	if err := validName(key); err != nil {
		return "", err
	}
	if d, ok := c.Lookup(kind, key); ok {
		return d, nil
	}
	parent := filepath.Join(c.Images(), kind)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	c.sweep(parent)
	tmp, err := buildTemp(parent, key, build)
	if err != nil {
		return "", err
	}
	final := c.Dir(kind, key)
	if err := os.Rename(tmp, final); err != nil {
		removeAll(tmp)
		if d, ok := c.Lookup(kind, key); ok {
			return d, nil // another builder won the race
		}
		return "", fmt.Errorf("image cache: %w", err)
	}
	return final, nil
}

// Rebuild builds the artefact kind/key afresh, as Ensure does, and puts it
// in place of a cached one: the old directory is renamed away and removed
// once the new one is in place. A reader that already opened a file of the
// old one keeps reading it.
func (c *Cache) Rebuild(kind, key string, build func(dir string) error) (string, error) {
	if err := validName(kind); err != nil {
		return "", err
	}
	if err := validName(key); err != nil {
		return "", err
	}
	if _, ok := c.Lookup(kind, key); !ok {
		return c.Ensure(kind, key, build)
	}
	parent := filepath.Join(c.Images(), kind)
	tmp, err := buildTemp(parent, key, build)
	if err != nil {
		return "", err
	}
	final := c.Dir(kind, key)
	if err := c.retire(final); err != nil {
		removeAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		removeAll(tmp)
		if d, ok := c.Lookup(kind, key); ok {
			return d, nil
		}
		return "", fmt.Errorf("image cache: %w", err)
	}
	return final, nil
}

// buildTemp runs build in a fresh build-temporary directory under parent
// (what sweep cleans up after a crash) and returns it, readable by all;
// on failure nothing is left.
func buildTemp(parent, key string, build func(dir string) error) (string, error) {
	tmp, err := os.MkdirTemp(parent, ".build-"+key+"-")
	if err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	if err := build(tmp); err != nil {
		removeAll(tmp)
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		removeAll(tmp)
		return "", fmt.Errorf("image cache: %w", err)
	}
	return tmp, nil
}

// retire removes the artefact directory dir: it is first renamed to a
// build-temporary name (so it vanishes from the cache at once, and a crash
// halfway through the removal leaves something sweep cleans up).
func (c *Cache) retire(dir string) error {
	old := filepath.Join(filepath.Dir(dir), fmt.Sprintf(".build-removed-%s-%d", filepath.Base(dir), time.Now().UnixNano()))
	if err := os.Rename(dir, old); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("image cache: %w", err)
	}
	if err := removeAll(old); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	return nil
}

// sweep removes build directories abandoned by crashed builders.
func (c *Cache) sweep(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".build-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
			removeAll(filepath.Join(parent, e.Name()))
		}
	}
}

func validName(s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) || strings.HasPrefix(s, ".") {
		return fmt.Errorf("image cache: bad name %q", s)
	}
	return nil
}

// fileSHA256 is the hex SHA-256 of a file.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
