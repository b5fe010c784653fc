package store

import (
	"os"
	"path/filepath"
)

// DefaultDir is where capsem keeps its event store unless told otherwise:
// $XDG_DATA_HOME/capsem, else ~/.local/share/capsem, else .capsem.
func DefaultDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "capsem")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "capsem")
	}
	return ".capsem"
}
