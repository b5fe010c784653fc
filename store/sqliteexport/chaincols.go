package sqliteexport

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/capsem/capsem/store"
)

// The hash chain's columns (store/chain.go): every table with one row per
// stored event ends with the event's place in its session's chain and,
// unless scrubbed, the stored value itself; sessions ends with the chain's
// head and seal. verifychain.go checks them.

// chainColumns end each table with one row per stored event.
var chainColumns = []column{
	{name: "prev_sha256", decl: "TEXT", doc: "hash chain: SHA-256 of the stored value of the session's event before this one (hex); NULL: recorded without a chain",
		value: func(_ *converter, s *source) any { return hexOrNil(s.prev) }},
	{name: "sha256", decl: "TEXT", doc: "SHA-256 of this event's stored value (hex): the next event's prev_sha256",
		value: func(_ *converter, s *source) any {
			if s.raw == nil {
				return nil
			}
			return hex.EncodeToString(s.sum[:])
		}},
	{name: "record", decl: "BLOB", doc: "the event as the store holds it (store/codec.go), from which this row is made; NULL in a --scrub export",
		value: func(c *converter, s *source) any {
			if c.scrub || s.raw == nil {
				return nil
			}
			return s.raw
		}},
}

// sessionChainColumns end sessions: its chain's head and seal, as the
// store's record of it has them.
var sessionChainColumns = []column{
	{name: "chain_seq", decl: "INTEGER", doc: "hash chain: the last event the seal covers; NULL: recorded without a chain",
		value: func(_ *converter, s *source) any {
			if s.sess.Chain == nil {
				return nil
			}
			return int64(s.sess.Chain.Seq)
		}},
	{name: "chain_head", decl: "TEXT", doc: "sha256 of that event (hex); the session's start's when chain_seq is 0",
		value: func(_ *converter, s *source) any {
			return chainHex(s.sess.Chain, func(c *store.Chain) []byte { return c.Head[:] })
		}},
	{name: "chain_meta", decl: "TEXT", doc: "SHA-256 of the command, policy_sha256, image, host and sandbox as recorded (hex; store/chain.go)",
		value: func(_ *converter, s *source) any {
			return chainHex(s.sess.Chain, func(c *store.Chain) []byte { return c.Meta[:] })
		}},
	{name: "chain_key", decl: "TEXT", doc: "the ed25519 public key that sealed it (hex); NULL: unsigned",
		value: func(_ *converter, s *source) any {
			return chainHex(s.sess.Chain, func(c *store.Chain) []byte { return c.Key })
		}},
	{name: "chain_sig", decl: "TEXT", doc: "ed25519 signature of the seal message (hex; store/chain.go)",
		value: func(_ *converter, s *source) any {
			return chainHex(s.sess.Chain, func(c *store.Chain) []byte { return c.Sig })
		}},
	{name: "scrubbed", decl: "INTEGER NOT NULL DEFAULT 0", doc: "1: exported with --scrub, texts redacted and records left out, so rows cannot be checked against them",
		value: func(c *converter, _ *source) any {
			if c.scrub {
				return int64(1)
			}
			return int64(0)
		}},
}

// isChainColumnName reports whether name is one of the chain's columns,
// which verifychain.go checks apart from the rest.
func isChainColumnName(name string) bool {
	for _, cols := range [][]column{chainColumns, sessionChainColumns} {
		for _, c := range cols {
			if c.name == name {
				return true
			}
		}
	}
	return false
}

func init() {
	for _, t := range schema {
		switch {
		case t == sessionsTable:
			t.columns = append(t.columns, sessionChainColumns...)
		case t.seq == uniqueSeq:
			t.columns = append(t.columns, chainColumns...)
		}
	}
}

func hexOrNil(h *[sha256.Size]byte) any {
	if h == nil {
		return nil
	}
	return hex.EncodeToString(h[:])
}

func chainHex(c *store.Chain, f func(*store.Chain) []byte) any {
	if c == nil {
		return nil
	}
	if b := f(c); len(b) > 0 {
		return hex.EncodeToString(b)
	}
	return nil
}
