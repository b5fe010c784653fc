package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Entry is one cached artefact: a built directory (Kind kernel, initramfs,
// rootfs, …; Key its content address) or a download (Kind "download"; Key
// its file name).
type Entry struct {
	Kind, Key, Path string
	Size            int64 // bytes of its files
	Modified        time.Time
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
	return Entry{Kind: kind, Key: key, Path: p, Size: size, Modified: st.ModTime()}, nil
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
