package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Import copies session id — its record and every event, byte for byte —
// from src into s, replacing what s may already hold of it (so an import
// interrupted half-way is simply done again). The copy is one synced batch:
// after Import returns nil the session is durable in s, and src may be
// deleted. src is typically a store a single run wrote on its own.
func (s *Store) Import(src *Store, id string) error {
	if s.readOnly {
		return errors.New("store: Import into a store opened read-only")
	}
	if err := checkID(id); err != nil {
		return err
	}
	if err := src.acquire(); err != nil {
		return err
	}
	defer src.release()
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()

	rec, closer, err := src.db.Get(sessionKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("store: import session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: import session %q: %w", id, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(sessionKey(id), rec, nil)
	closer.Close()

	lo := eventKeyPrefix(id)
	_ = b.DeleteRange(lo, prefixEnd(lo), nil)
	it, err := src.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: import events of %q: %w", id, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("store: import events of %q: %w", id, err)
		}
		_ = b.Set(it.Key(), v, nil)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: import events of %q: %w", id, err)
	}
	if err := s.disk.room(uint64(b.Len())); err != nil {
		return fmt.Errorf("store: import session %q: %s; the session stays where it is until then", id, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: import session %q: %w", id, err)
	}
	return nil
}
