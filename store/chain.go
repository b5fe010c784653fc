package store

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file holds the hash chain of a session's events and the seal over
// its head: what they are, how the writer makes them, and how a reader
// checks them (Store.VerifyChain, and the SQLite export's check, which
// feeds the exported records to the same ChainCheck).
//
// STABILITY: this is an on-disk format, in every store and every export,
// and a seal signed today must verify in every later capsem. The genesis
// and seal prefixes, the slot's place and the message's layout must never
// change; a new scheme takes a new prefix ("capsem chain v2").
//
// Every event a Writer stores carries, in envelope field 2 ("prev"), the
// SHA-256 of the whole stored value of the event before it in its session;
// the first event carries the genesis, SHA-256("capsem chain v1\x00" ‖
// session id). The Writer puts the field right after the header:
//
//	byte 0        version (1)
//	bytes 1..8    wall time
//	byte 9        0x12, the tag of field 2, wire type 2
//	byte 10       0x20, its length: 32
//	bytes 11..42  prev
//	bytes 43..    the event's other fields
//
// A reader takes prev wherever the field is (it is an ordinary field), but
// the writer's fixed place lets it patch the slot without re-encoding. The
// field was added after the first release: an older value has no prev, and
// an older session is reported as recorded without a chain, not as broken.
//
// The session record carries the head (Chain): the seq of the last event
// it covers and the SHA-256 of that event's value, written with the batch
// that holds the event (at most every recordEvery, and at Begin and End),
// so that it matches the events on disk, crash or not; a crashed writer
// leaves at most recordEvery of events after it, chained but not sealed. With a seal key
// (Options.SealKey) the record also carries the key's public half and an
// ed25519 signature over the seal message:
//
//	"capsem seal v1\x00"
//	uvarint  length of the session id, then the id
//	int64    started at, Unix ns, big-endian
//	int64    ended at, Unix ns (0: running, or the writer crashed)
//	byte     1 if an exit code is recorded, then int64 the code; else 0
//	uint64   the head's seq
//	32 bytes the head
//	32 bytes the meta hash (SessionMeta)
//
// The meta hash is SHA-256 of:
//
//	uvarint  the number of words of the command, then each word
//	string   the policy's SHA-256, the image, the host, the sandbox
//
// where a string (and a word) is its uvarint length, then its bytes. Every
// part of both is in the SQLite export's sessions row, so an export is
// checked with no access to the store; a scrubbed export, whose command
// may have changed, still carries the meta hash that was signed.

const (
	chainGenesisPrefix = "capsem chain v1\x00"
	sealPrefix         = "capsem seal v1\x00"
	fPrev              = 2 // the envelope field holding prev
	prevTagOffset      = headerLen
	prevOffset         = headerLen + 2
	chainedHeaderLen   = prevOffset + sha256.Size
)

// Chain is a session's hash chain head and its seal.
type Chain struct {
	Seq  uint64            // the last event the head covers; 0 before the first
	Head [sha256.Size]byte // SHA-256 of that event's stored value; the genesis at Seq 0
	Meta [sha256.Size]byte // SessionMeta of the session, as sealed
	Key  ed25519.PublicKey // the seal key's public half; nil when unsigned
	Sig  []byte            // ed25519 over SealMessage; nil when unsigned
}

// ChainGenesis is the prev of a session's first event.
func ChainGenesis(id string) [sha256.Size]byte {
	return sha256.Sum256(append([]byte(chainGenesisPrefix), id...))
}

// ValueHash is the hash that the next event's prev carries: SHA-256 of a
// stored value, as it is stored.
func ValueHash(v []byte) [sha256.Size]byte { return sha256.Sum256(v) }

// SealMessage is what a session's seal signs (drawn above).
func SealMessage(s *Session) []byte {
	b := make([]byte, 0, len(sealPrefix)+len(s.ID)+80)
	b = append(b, sealPrefix...)
	b = binary.AppendUvarint(b, uint64(len(s.ID)))
	b = append(b, s.ID...)
	b = binary.BigEndian.AppendUint64(b, uint64(unixNanoOrZero(s.StartedAt)))
	b = binary.BigEndian.AppendUint64(b, uint64(unixNanoOrZero(s.EndedAt)))
	if s.ExitCode != nil {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(int64(*s.ExitCode)))
	} else {
		b = append(b, 0)
	}
	var c Chain
	if s.Chain != nil {
		c = *s.Chain
	}
	b = binary.BigEndian.AppendUint64(b, c.Seq)
	b = append(b, c.Head[:]...)
	return append(b, c.Meta[:]...)
}

// SessionMeta is the meta hash of s (drawn above): what the seal says of
// the session besides its times, exit and events.
func SessionMeta(s *Session) [sha256.Size]byte {
	b := binary.AppendUvarint(nil, uint64(len(s.Command)))
	for _, w := range append(slices.Clip(s.Command), s.PolicySHA256, s.Image, s.Host, s.Sandbox) {
		b = binary.AppendUvarint(b, uint64(len(w)))
		b = append(b, w...)
	}
	return sha256.Sum256(b)
}

// seal signs s's chain with key, setting Chain.Key and Chain.Sig. A nil
// key leaves the chain unsigned.
func seal(s *Session, key ed25519.PrivateKey) {
	if s.Chain == nil {
		return
	}
	s.Chain.Meta = SessionMeta(s)
	if key == nil {
		return
	}
	s.Chain.Key = key.Public().(ed25519.PublicKey)
	s.Chain.Sig = ed25519.Sign(key, SealMessage(s))
}

// PrevOf returns the prev a stored value carries, and whether it has one.
// A value that cannot be read has none.
func PrevOf(v []byte) ([sha256.Size]byte, bool) {
	var prev [sha256.Size]byte
	if len(v) >= chainedHeaderLen && v[prevTagOffset] == fPrev<<3|wireBytes && v[prevTagOffset+1] == sha256.Size {
		copy(prev[:], v[prevOffset:])
		return prev, true
	}
	if len(v) < headerLen || v[0] != eventVersion {
		return prev, false
	}
	d := decoder{b: v[headerLen:]}
	var f field
	for len(d.b) > 0 {
		if d.field(&f) != nil {
			return prev, false
		}
		if f.num == fPrev && f.wire == wireBytes && len(f.s) == sha256.Size {
			copy(prev[:], f.s)
			return prev, true
		}
	}
	return prev, false
}

// ErrChainBroken is wrapped by every error that says a session's record
// does not match its hash chain or its seal: a *ChainError.
var ErrChainBroken = errors.New("hash chain broken")

// ChainError says where a session's chain breaks and how.
type ChainError struct {
	Session string
	Seq     uint64 // the first event that does not match; 0: the record itself
	Why     string
}

func (e *ChainError) Error() string {
	if e.Seq == 0 {
		return fmt.Sprintf("store: session %s: %v: %s", e.Session, ErrChainBroken, e.Why)
	}
	return fmt.Sprintf("store: session %s: %v at seq %d: %s", e.Session, ErrChainBroken, e.Seq, e.Why)
}

func (e *ChainError) Unwrap() error { return ErrChainBroken }

func broken(id string, seq uint64, format string, a ...any) error {
	return &ChainError{Session: id, Seq: seq, Why: fmt.Sprintf(format, a...)}
}

// ChainStatus is what a check of a session's chain found.
type ChainStatus struct {
	// Chained: the session's events and record carry a chain, and it
	// holds. False for a session recorded before chains (or by a build
	// without them), which is not an error.
	Chained bool
	Events  uint64 // events checked
	// Unsealed are the events after the record's head: those the writer
	// committed after its last record (recordEvery), when the session is
	// still running or its writer crashed. They are chained to the sealed
	// ones, but nothing signed says how many there were. Always 0 for an
	// ended session (End seals every event).
	Unsealed uint64
	Key      ed25519.PublicKey // the key whose seal verified; nil when unsigned
}

// ChainCheck checks a session's chain: made from the session's record,
// it is given each stored value in sequence order (Add), then End says
// whether the record's head and seal match them. The first mismatch is an
// error wrapping ErrChainBroken that names the seq.
type ChainCheck struct {
	sess      *Session
	n         uint64 // values added
	prev      [sha256.Size]byte
	atHead    [sha256.Size]byte // the hash of the value at the record's head seq
	chained   uint64            // values with a prev
	unchained uint64
	// MetaScrubbed: the session's command and other metadata are not as
	// recorded (a scrubbed export): the seal is checked with the meta hash
	// the record carries, not one made from them.
	MetaScrubbed bool
}

// NewChainCheck begins the check of the events of session s, as its
// record has it.
func NewChainCheck(s *Session) *ChainCheck {
	c := &ChainCheck{sess: s, prev: ChainGenesis(s.ID)}
	c.atHead = c.prev
	return c
}

// Add checks the value of event seq: it must follow the last one added
// and carry the hash of its value.
func (c *ChainCheck) Add(seq uint64, v []byte) error {
	prev, ok := PrevOf(v)
	var p *[sha256.Size]byte
	if ok {
		p = &prev
	}
	return c.AddHashes(seq, p, ValueHash(v))
}

// AddHashes is Add given what a value's place in the chain is: the prev
// it carries (nil: none) and its hash. A reader that has the hashes but
// not the values (a scrubbed export) checks the chain's links and its
// seal with it, not the events' contents.
func (c *ChainCheck) AddHashes(seq uint64, p *[sha256.Size]byte, sum [sha256.Size]byte) error {
	id := c.sess.ID
	if seq != c.n+1 {
		if seq <= c.n {
			return broken(id, seq, "it appears twice, or out of order")
		}
		return broken(id, seq, "events %d to %d are missing", c.n+1, seq-1)
	}
	switch {
	case p == nil:
		c.unchained++
		if c.chained > 0 || c.sess.Chain != nil {
			return broken(id, seq, "the event has no prev hash, where the session is chained")
		}
	case c.unchained > 0 || c.sess.Chain == nil:
		return broken(id, seq, "the event has a prev hash, where the session's record has no chain")
	case *p != c.prev:
		return broken(id, seq, "its prev hash is not the hash of event %d", seq-1)
	default:
		c.chained++
	}
	c.n = seq
	c.prev = sum
	if h := c.sess.Chain; h != nil && h.Seq == seq {
		c.atHead = c.prev
	}
	return nil
}

// End checks the record's head and seal against the values added.
func (c *ChainCheck) End() (ChainStatus, error) {
	s, id := c.sess, c.sess.ID
	st := ChainStatus{Events: c.n}
	h := s.Chain
	if h == nil {
		return st, nil // Add refused any chained value
	}
	switch {
	case h.Seq > c.n:
		return st, broken(id, c.n+1, "the record's head covers events up to %d; %d to %d are missing", h.Seq, c.n+1, h.Seq)
	case h.Head != c.atHead:
		return st, broken(id, h.Seq, "the record's head is not the hash of that event")
	case h.Seq < c.n && !s.EndedAt.IsZero():
		return st, broken(id, h.Seq+1, "the session ended at event %d, and events follow it", h.Seq)
	}
	if !c.MetaScrubbed && h.Meta != SessionMeta(s) {
		return st, broken(id, 0, "the session's command, policy, image, host or sandbox is not what was recorded")
	}
	st.Chained, st.Unsealed = true, c.n-h.Seq
	if h.Sig == nil && h.Key == nil {
		return st, nil
	}
	if len(h.Key) != ed25519.PublicKeySize || !ed25519.Verify(h.Key, SealMessage(s), h.Sig) {
		return st, broken(id, 0, "the seal's signature does not verify (the record was changed after it was signed)")
	}
	st.Key = bytes.Clone(h.Key)
	return st, nil
}

// VerifyChain checks session id's events against its hash chain and the
// seal of its record. It says nothing about whose key signed: the caller
// compares ChainStatus.Key with a key it trusts.
func (s *Store) VerifyChain(id string) (ChainStatus, error) {
	if err := s.acquire(); err != nil {
		return ChainStatus{}, err
	}
	defer s.release()
	// One snapshot for the record and the events: a running session
	// commits between two reads.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	sess, err := readSession(snap, id)
	if err != nil {
		return ChainStatus{}, err
	}
	c := NewChainCheck(&sess)
	if err := walkValues(snap, id, 0, c.Add); err != nil {
		return ChainStatus{Events: c.n}, err
	}
	return c.End()
}

func unixNanoOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
