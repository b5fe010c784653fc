package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the store into dir, which must not
// exist, hard-linking its files where it can: a reader opens the copy with
// OpenReadOnly while this store goes on being written (a running
// sandbox's session, which capsem sessions, inspect and export read that
// way). Events appended but not yet committed are not in it.
func (s *Store) Checkpoint(dir string) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	// The WAL's tail is copied as it is on disk: sync it first, so that
	// every committed event is in the copy.
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("store: checkpoint: %w", err)
	}
	if err := s.db.Checkpoint(dir); err != nil {
		return fmt.Errorf("store: checkpoint into %s: %w", dir, err)
	}
	return nil
}
