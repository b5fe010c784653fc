package store

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

var testSealKey = ed25519.NewKeyFromSeed([]byte("capsem chain test seed, 32 bytes"))

// chainedSession writes a session of n events and ends it with exit code
// 3, sealing with key (nil: unsigned).
func chainedSession(t *testing.T, key ed25519.PrivateKey, n int) (*Store, string) {
	t.Helper()
	s, err := OpenWith(t.TempDir(), Options{SealKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w, err := s.Begin(Session{})
	if err != nil {
		t.Fatal(err)
	}
	evs := benchEvents()
	for i := range n {
		w.Append(evs[i%len(evs)])
	}
	code := 3
	if err := w.End(&code); err != nil {
		t.Fatal(err)
	}
	return s, w.ID()
}

func TestChainVerifies(t *testing.T) {
	for _, c := range []struct {
		why string
		key ed25519.PrivateKey
	}{
		{"sealed with the installation's key: the key is reported for the caller to trust", testSealKey},
		{"no seal key: the chain is kept and holds, unsigned", nil},
	} {
		s, id := chainedSession(t, c.key, 1000)
		st, err := s.VerifyChain(id)
		if err != nil || !st.Chained || st.Events != 1000 {
			t.Fatalf("%s: %+v, %v", c.why, st, err)
		}
		if c.key != nil && !st.Key.Equal(c.key.Public()) || c.key == nil && st.Key != nil {
			t.Errorf("%s: key %x", c.why, st.Key)
		}
		sess, _ := s.Session(id)
		if sess.Chain == nil || sess.Chain.Seq != 1000 {
			t.Errorf("%s: record's chain %+v", c.why, sess.Chain)
		}
		// Every value carries its prev at the writer's fixed place, and
		// the first one the genesis.
		var prev [32]byte
		_ = s.Values(id, 0, func(seq uint64, v []byte) error {
			p, ok := PrevOf(v)
			want := ChainGenesis(id)
			if seq > 1 {
				want = prev
			}
			if !ok || p != want || v[prevTagOffset] != 0x12 || v[prevTagOffset+1] != 0x20 {
				t.Fatalf("%s: seq %d: prev %x (%v), want %x", c.why, seq, p, ok, want)
			}
			prev = ValueHash(v)
			return nil
		})
	}
}

// TestChainBroken: every way of editing the store's record that the chain
// or the seal must catch, each naming where.
func TestChainBroken(t *testing.T) {
	other := ed25519.NewKeyFromSeed([]byte("an attacker's key, not the seal."))
	cases := []struct {
		why    string
		edit   func(t *testing.T, s *Store, id string)
		wantIn string
	}{
		{"one byte of one event's value changed", func(t *testing.T, s *Store, id string) {
			editValue(t, s, id, 500, func(v []byte) []byte { v[len(v)-1] ^= 1; return v })
		}, "at seq 501: its prev hash is not the hash of event 500"},
		{"one event's time changed and its successor's prev recomputed: the change moves one event on", func(t *testing.T, s *Store, id string) {
			var h [32]byte
			editValue(t, s, id, 500, func(v []byte) []byte { v[8]++; h = ValueHash(v); return v })
			editValue(t, s, id, 501, func(v []byte) []byte { copy(v[prevOffset:], h[:]); return v })
		}, "at seq 502"},
		{"an event deleted", func(t *testing.T, s *Store, id string) {
			if err := s.db.Delete(appendEventKey(nil, id, 700), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, "at seq 701: events 700 to 700 are missing"},
		{"the last events deleted", func(t *testing.T, s *Store, id string) {
			for seq := uint64(990); seq <= 1000; seq++ {
				_ = s.db.Delete(appendEventKey(nil, id, seq), pebble.Sync)
			}
		}, "at seq 990: the record's head covers events up to 1000"},
		{"the exit code changed in the record", func(t *testing.T, s *Store, id string) {
			editRecord(t, s, id, func(sess *Session) { sess.ExitCode = new(0) })
		}, "signature does not verify"},
		{"the command changed in the record", func(t *testing.T, s *Store, id string) {
			editRecord(t, s, id, func(sess *Session) { sess.Command = []string{"true"} })
		}, "the session's command, policy, image, host or sandbox is not what was recorded"},
		{"the command changed in the record, and the meta hash with it", func(t *testing.T, s *Store, id string) {
			editRecord(t, s, id, func(sess *Session) { sess.Command = []string{"true"}; sess.Chain.Meta = SessionMeta(sess) })
		}, "signature does not verify"},
		{"the record's head rewritten to the edited chain, without the key", func(t *testing.T, s *Store, id string) {
			var h [32]byte
			editValue(t, s, id, 1000, func(v []byte) []byte { v[len(v)-1] ^= 1; h = ValueHash(v); return v })
			editRecord(t, s, id, func(sess *Session) { sess.Chain.Head = h })
		}, "signature does not verify"},
		{"the record's chain removed, as if recorded before chains", func(t *testing.T, s *Store, id string) {
			editRecord(t, s, id, func(sess *Session) { sess.Chain = nil })
		}, "at seq 1: the event has a prev hash, where the session's record has no chain"},
		{"an event added after the end, chained to the last", func(t *testing.T, s *Store, id string) {
			var h [32]byte
			editValue(t, s, id, 1000, func(v []byte) []byte { h = ValueHash(v); return v })
			ev := benchEvents()[0]
			v := appendChainedEvent(nil, &ev)
			copy(v[prevOffset:], h[:])
			_ = s.db.Set(appendEventKey(nil, id, 1001), v, pebble.Sync)
		}, "at seq 1001: the session ended at event 1000, and events follow it"},
	}
	for _, c := range cases {
		s, id := chainedSession(t, testSealKey, 1000)
		c.edit(t, s, id)
		_, err := s.VerifyChain(id)
		if !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), c.wantIn) {
			t.Errorf("%s: %v; want ErrChainBroken with %q", c.why, err, c.wantIn)
		}
	}

	// Re-signed with another key: the chain holds, and the key it reports
	// is not the installation's, which is what the caller checks.
	s, id := chainedSession(t, testSealKey, 10)
	editRecord(t, s, id, func(sess *Session) { sess.ExitCode = new(0); seal(sess, other) })
	st, err := s.VerifyChain(id)
	if err != nil || st.Key.Equal(testSealKey.Public()) || !st.Key.Equal(other.Public()) {
		t.Errorf("re-signed with another key: %+v, %v; want the other key reported", st, err)
	}
}

// TestChainOldSession: a session recorded before chains (no prev in any
// value, no chain in the record) is reported unchained, not broken.
func TestChainOldSession(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A session begun and never written to is chained (to the genesis).
	w, _ := s.Begin(Session{})
	if st, err := s.VerifyChain(w.ID()); err != nil || !st.Chained || st.Events != 0 {
		t.Fatalf("empty session: %+v, %v", st, err)
	}
	w.End(nil)
	const id = "old"
	sess := Session{ID: id, StartedAt: time.Unix(1700000000, 0).UTC()}
	b := s.db.NewBatch()
	for seq := uint64(1); seq <= 3; seq++ {
		ev := benchEvents()[seq-1]
		_ = b.Set(appendEventKey(nil, id, seq), appendEvent(nil, &ev), nil)
	}
	sess.Counts.Events = 3
	_ = b.Set(sessionKey(id), encodeSession(&sess), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	st, err := s.VerifyChain(id)
	if err != nil || st.Chained || st.Events != 3 {
		t.Fatalf("old session: %+v, %v; want unchained, no error", st, err)
	}
	// One chained value among unchained ones is an edit, not an old session.
	ev := benchEvents()[0]
	v := appendChainedEvent(nil, &ev)
	if err := s.db.Set(appendEventKey(nil, id, 2), v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyChain(id); !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), "at seq 2") {
		t.Fatalf("mixed session: %v", err)
	}
}

// TestChainedGolden: the writer's encoding of an event is the unchained
// one with field 2 right after the header; the bytes are fixed.
func TestChainedGolden(t *testing.T) {
	ev := Event{Time: time.Unix(1700000000, 6).UTC(), Kind: KindFS, FS: &FS{Action: FSCreated, Path: "x/y", Size: 3}}
	const old = "0117979cfe362a0006" + "0a026673821407637265617465648a1403782f79981406"
	const chained = "0117979cfe362a0006" + "1220" + "0000000000000000000000000000000000000000000000000000000000000000" +
		"0a026673821407637265617465648a1403782f79981406"
	if got := hex.EncodeToString(appendChainedEvent(nil, &ev)); got != chained {
		t.Errorf("chained encoding %s, want %s", got, chained)
	}
	if got := hex.EncodeToString(appendEvent(nil, &ev)); got != old {
		t.Errorf("unchained encoding %s, want %s", got, old)
	}
	v, _ := hex.DecodeString(chained)
	var got Event
	if err := decodeEvent(v, &got); err != nil || got.FS == nil || got.FS.Path != "x/y" {
		t.Errorf("chained value decoded as %+v, %v", got, err)
	}
	// SHA-256("capsem chain v1\x00s1"), as `printf 'capsem chain v1\0s1' | sha256sum` gives it.
	if h := ChainGenesis("s1"); hex.EncodeToString(h[:]) != "91a44f6e1c6085524a9c9a47d809a3aa6d7a481baa980198822a7b098a4dedfd" {
		t.Errorf("genesis of s1: %x", h)
	}
	sess := Session{ID: "s1", StartedAt: time.Unix(0, 1), EndedAt: time.Unix(0, 2), ExitCode: new(-1),
		Chain: &Chain{Seq: 3, Head: [32]byte{31: 9}, Meta: [32]byte{0: 7}}}
	const seal = "63617073656d207365616c20763100" + "02" + "7331" + "0000000000000001" + "0000000000000002" +
		"01" + "ffffffffffffffff" + "0000000000000003" + "0000000000000000000000000000000000000000000000000000000000000009" +
		"0700000000000000000000000000000000000000000000000000000000000000"
	if got := hex.EncodeToString(SealMessage(&sess)); got != seal {
		t.Errorf("seal message %s, want %s", got, seal)
	}
	// printf '\002\002sh\000\000\001i\000\003box' | sha256sum
	sess.Command, sess.Image, sess.Sandbox = []string{"sh", ""}, "i", "box"
	if m := SessionMeta(&sess); hex.EncodeToString(m[:]) != "e4044279a7c230335a1ea75dba31df45c332938ecc40b234d3c06eba268b8d7a" {
		t.Errorf("meta hash %x", m)
	}
}

func editValue(t *testing.T, s *Store, id string, seq uint64, f func([]byte) []byte) {
	t.Helper()
	k := appendEventKey(nil, id, seq)
	v, closer, err := s.db.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	nv := f(append([]byte(nil), v...))
	closer.Close()
	if err := s.db.Set(k, nv, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func editRecord(t *testing.T, s *Store, id string, f func(*Session)) {
	t.Helper()
	sess, err := s.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	f(&sess)
	if err := s.db.Set(sessionKey(id), encodeSession(&sess), pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// FuzzChainCheck: values from a hostile store or export (a file someone
// sent) never make PrevOf or the check panic, PrevOf finds what the
// writer's fixed place holds, and a value chained to the genesis is
// accepted as the first event of its session.
func FuzzChainCheck(f *testing.F) {
	ev := benchEvents()[2]
	f.Add(appendChainedEvent(nil, &ev), uint64(1))
	f.Add(appendEvent(nil, &ev), uint64(1))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x20}, uint64(2))
	f.Fuzz(func(t *testing.T, v []byte, seq uint64) {
		prev, ok := PrevOf(v)
		if ok && len(v) >= chainedHeaderLen && v[prevTagOffset] == 0x12 && v[prevTagOffset+1] == 0x20 && !bytes.Equal(prev[:], v[prevOffset:chainedHeaderLen]) {
			t.Fatalf("PrevOf %x, the fixed place holds %x", prev, v[prevOffset:chainedHeaderLen])
		}
		sess := &Session{ID: "s", Chain: &Chain{Seq: 1, Head: ValueHash(v)}}
		c := NewChainCheck(sess)
		err := c.Add(seq, v)
		if seq == 1 && ok && prev == ChainGenesis("s") {
			if err != nil {
				t.Fatalf("a value chained to the genesis refused: %v", err)
			}
			if _, err := c.End(); err != nil {
				t.Fatalf("End: %v", err)
			}
		}
	})
}
