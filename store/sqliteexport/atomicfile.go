package sqliteexport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeAtomically makes the file outPath with write, which fills the fresh
// temporary file whose path it is given, in outPath's directory. The file
// is synced and only then moved to outPath, so that outPath never holds a
// partial file; on any error the temporary file is removed and outPath is
// untouched. Without overwrite an existing outPath is an error, even one
// that appears while write runs.
func writeAtomically(outPath string, overwrite bool, write func(tmp string) error) (err error) {
	dir, base := filepath.Split(outPath)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("sqliteexport: create a temporary file next to %s: %w", outPath, err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()

	if err := write(tmp); err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("sqliteexport: sync %s: %w", tmp, err)
	}
	if err := place(tmp, outPath, overwrite); err != nil {
		return err
	}
	_ = syncFile(dir) // make the rename durable; not every filesystem can sync a directory
	return nil
}

// refuseExisting is the error for an outPath that exists (or cannot be
// checked), nil when there is none.
func refuseExisting(outPath string) error {
	_, err := os.Lstat(outPath)
	if err == nil {
		return fmt.Errorf("sqliteexport: %s already exists; remove it, choose another path, or ask to overwrite it: %w", outPath, fs.ErrExist)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqliteexport: check %s: %w", outPath, err)
	}
	return nil
}

// place moves the finished file tmp to outPath. Without overwrite it links
// (which fails if outPath appeared meanwhile) rather than renames.
func place(tmp, outPath string, overwrite bool) error {
	if overwrite {
		return rename(tmp, outPath)
	}
	if err := os.Link(tmp, outPath); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return refuseExisting(outPath)
		}
		// A filesystem without hard links: check, then rename.
		if err := refuseExisting(outPath); err != nil {
			return err
		}
		return rename(tmp, outPath)
	}
	return os.Remove(tmp)
}

func rename(tmp, outPath string) error {
	if err := os.Rename(tmp, outPath); err != nil {
		return fmt.Errorf("sqliteexport: move the export into place at %s: %w", outPath, err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
