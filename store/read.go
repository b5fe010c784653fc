package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Session returns the record of session id, or an error wrapping ErrNotFound.
func (s *Store) Session(id string) (Session, error) {
	if err := s.acquire(); err != nil {
		return Session{}, err
	}
	defer s.release()
	return readSession(s.db, id)
}

// readSession reads the record of session id from r: the store, or one
// snapshot of it.
func readSession(r pebble.Reader, id string) (Session, error) {
	v, closer, err := r.Get(sessionKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return Session{}, fmt.Errorf("store: session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: read session %q: %w", id, err)
	}
	defer closer.Close()
	sess, err := decodeSession(v)
	if err != nil {
		return Session{}, fmt.Errorf("store: session record %q: %w", id, err)
	}
	return sess, nil
}

// Sessions returns every session in the store, newest (latest StartedAt)
// first.
func (s *Store) Sessions() ([]Session, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	lo := []byte(sessionPrefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	defer it.Close()
	var out []Session
	for it.First(); it.Valid(); it.Next() {
		id := string(it.Key()[len(sessionPrefix):])
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("store: read session %q: %w", id, err)
		}
		sess, err := decodeSession(v)
		if err != nil {
			return nil, fmt.Errorf("store: session record %q: %w", id, err)
		}
		out = append(out, sess)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	slices.SortStableFunc(out, func(a, b Session) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// Events calls fn with each event of session id, in sequence order. It stops
// at the first error fn returns and returns it. An event that cannot be
// decoded (garbage, or a version from a newer capsem) stops the walk with an
// error naming the session and sequence number. A session whose writer
// crashed is read up to its last synced event.
//
// The Event passed to fn, and its payload, are fn's to keep.
func (s *Store) Events(id string, fn func(Event) error) error { return s.EventsAfter(id, 0, fn) }

// EventsAfter is Events from the event after sequence number after on: a
// reader that has seen events up to after reads on from there.
func (s *Store) EventsAfter(id string, after uint64, fn func(Event) error) error {
	return s.Values(id, after, func(seq uint64, v []byte) error {
		ev := Event{Session: id, Seq: seq}
		if err := decodeEvent(v, &ev); err != nil {
			return fmt.Errorf("store: session %q event %d: %w", id, seq, err)
		}
		return fn(ev)
	})
}

// Values calls fn with the stored value of each event of session id from
// the one after sequence number after on, in sequence order, as stored
// (DecodeEvent reads one; the hash chain is over them). v is fn's only
// until it returns.
func (s *Store) Values(id string, after uint64, fn func(seq uint64, v []byte) error) error {
	if _, err := s.Session(id); err != nil {
		return err
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	return walkValues(s.db, id, after, fn)
}

// walkValues is Values on r: the store, or one snapshot of it.
func walkValues(r pebble.Reader, id string, after uint64, fn func(seq uint64, v []byte) error) error {
	lo := eventKeyPrefix(id)
	from := lo
	if after > 0 {
		if after == math.MaxUint64 {
			return nil
		}
		from = appendEventKey(nil, id, after+1)
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("store: read events of %q: %w", id, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(lo)+8 {
			return fmt.Errorf("store: session %q: event key %q: %w: key is not prefix + 8-byte sequence", id, k, ErrCorrupt)
		}
		seq := binary.BigEndian.Uint64(k[len(lo):])
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("store: session %q event %d: %w", id, seq, err)
		}
		if err := fn(seq, v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: read events of %q: %w", id, err)
	}
	return nil
}
