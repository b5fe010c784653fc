package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/capsem/capsem/guest/arch"
)

// Entry is one cached artefact: a built directory (Kind kernel, initramfs,
// rootfs, …; Key its content address) or a download (Kind "download"; Key
// its file name).
type Entry struct {
	Kind, Key, Path string
	// Arch is what the artefact is built for, from its manifest (a
	// download's from its .deb name); "" when nothing says.
	Arch     arch.Arch
	Size     int64 // bytes of its files
	Modified time.Time
}

// KindDownload is the Kind of a fetched input in the downloads directory.
const KindDownload = "download"

// List returns every cached artefact and download, sorted by kind and key.
// Builds in progress (and their leftovers) are not listed.
func (c *Cache) List() ([]Entry, error) {
	var out []Entry
	kinds, err := os.ReadDir(c.Images())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	for _, k := range kinds {
		if !k.IsDir() || strings.HasPrefix(k.Name(), ".") {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(c.Images(), k.Name()))
		if err != nil {
			return nil, fmt.Errorf("image cache: %w", err)
		}
		for _, e := range ents {
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			p := filepath.Join(c.Images(), k.Name(), e.Name())
			ent, err := entryOf(k.Name(), e.Name(), p)
			if err != nil {
				return nil, err
			}
			out = append(out, ent)
		}
	}
	dl, err := os.ReadDir(c.Downloads())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	for _, e := range dl {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		ent, err := entryOf(KindDownload, e.Name(), filepath.Join(c.Downloads(), e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, ent)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

func entryOf(kind, key, p string) (Entry, error) {
	st, err := os.Stat(p)
	if err != nil {
		return Entry{}, fmt.Errorf("image cache: %w", err)
	}
	size, err := diskSize(p)
	if err != nil {
		return Entry{}, fmt.Errorf("image cache: %w", err)
	}
	return Entry{Kind: kind, Key: key, Path: p, Arch: archOf(kind, key, p), Size: size, Modified: st.ModTime()}, nil
}

// archManifest is what archOf reads of a cache directory's manifest.json:
// a kernel's and an initramfs's "arch", a root filesystem's recipe's.
type archManifest struct {
	Arch   arch.Arch `json:"arch"`
	Recipe *struct {
		Arch arch.Arch
	} `json:"recipe"`
}

// writeArchManifest writes manifest.json with only the architecture in it.
func writeArchManifest(dir string, a arch.Arch) error {
	b, err := json.Marshal(archManifest{Arch: a})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644)
}

// archOf is the architecture of the cache entry at p. An entry written
// before arm64 existed says none, and is amd64.
func archOf(kind, key, p string) arch.Arch {
	if kind == KindDownload {
		for _, a := range arch.All {
			if strings.HasSuffix(key, "_"+a.String()+".deb") {
				return a
			}
		}
		return ""
	}
	b, err := os.ReadFile(filepath.Join(p, "manifest.json"))
	var m archManifest
	switch {
	case errors.Is(err, fs.ErrNotExist) && kind == "initramfs":
		return arch.AMD64
	case err != nil, json.Unmarshal(b, &m) != nil:
		return ""
	case m.Recipe != nil:
		m.Arch = m.Recipe.Arch
	}
	return arch.Recorded(m.Arch)
}

// diskSize is the bytes of the regular files at or under p.
func diskSize(p string) (int64, error) {
	var n int64
	err := filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// Remove removes the cached entry whose key is key, or the only one whose
// key starts with key. A guest that used it is rebuilt when next needed.
func (c *Cache) Remove(key string) error {
	if key == "" {
		return errors.New("image cache: remove: no key given")
	}
	ents, err := c.List()
	if err != nil {
		return err
	}
	var exact, prefix []Entry
	for _, e := range ents {
		switch {
		case e.Key == key:
			exact = append(exact, e)
		case strings.HasPrefix(e.Key, key):
			prefix = append(prefix, e)
		}
	}
	match := exact
	if len(match) == 0 {
		match = prefix
	}
	switch len(match) {
	case 0:
		return fmt.Errorf("image cache: no entry with key %q in %s (capsem image list shows the keys)", key, c.Root)
	case 1:
	default:
		var names []string
		for _, e := range match {
			names = append(names, e.Kind+" "+e.Key)
		}
		return fmt.Errorf("image cache: key %q is ambiguous, it matches %s: give more of it", key, strings.Join(names, ", "))
	}
	e := match[0]
	if e.Kind == KindDownload {
		if err := os.Remove(e.Path); err != nil {
			return fmt.Errorf("image cache: %w", err)
		}
		return nil
	}
	return c.retire(e.Path)
}
