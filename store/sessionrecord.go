package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Session records: a version byte, then JSON. They are written a few times
// per batch at most, so JSON's cost does not matter and unknown fields are
// ignored by older readers. This is an on-disk format, in every store:
// add fields, never rename, retype or reuse one, or older records read
// wrong.

const sessionVersion = 1

type sessionRecord struct {
	ID           string           `json:"id"`
	StartedAt    time.Time        `json:"started_at"`
	EndedAt      *time.Time       `json:"ended_at,omitempty"`
	Command      []string         `json:"command,omitempty"`
	ExitCode     *int             `json:"exit_code,omitempty"`
	PolicySHA256 string           `json:"policy_sha256,omitempty"`
	Image        string           `json:"image,omitempty"`
	Host         string           `json:"host,omitempty"`
	Sandbox      string           `json:"sandbox,omitempty"`
	Placeholders []placeholderRec `json:"placeholders,omitempty"`
	Events       int64            `json:"events"`
	Kinds        map[Kind]int64   `json:"kinds,omitempty"`
	Allowed      int64            `json:"allowed,omitempty"`
	Denied       int64            `json:"denied,omitempty"`
	Lost         int64            `json:"lost,omitempty"`
	Agent        map[string]int64 `json:"agent,omitempty"`
	Bytes        int64            `json:"bytes,omitempty"`
	InputTokens  int64            `json:"input_tokens,omitempty"`
	OutputTokens int64            `json:"output_tokens,omitempty"`
	CostUSD      float64          `json:"cost_usd,omitempty"`
	Chain        *chainRec        `json:"chain,omitempty"`
}

// chainRec is a Chain: the head in hex; the key and signature base64
// (encoding/json's []byte), absent when unsigned.
type chainRec struct {
	Seq  uint64 `json:"seq"`
	Head string `json:"head"`
	Meta string `json:"meta"`
	Key  []byte `json:"key,omitempty"`
	Sig  []byte `json:"sig,omitempty"`
}

type placeholderRec struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func encodeSession(s *Session) []byte {
	r := sessionRecord{
		ID:           s.ID,
		StartedAt:    s.StartedAt.UTC(),
		Command:      s.Command,
		ExitCode:     s.ExitCode,
		PolicySHA256: s.PolicySHA256,
		Image:        s.Image,
		Host:         s.Host,
		Sandbox:      s.Sandbox,
		Events:       s.Counts.Events,
		Kinds:        s.Counts.Kinds,
		Allowed:      s.Counts.Allowed,
		Denied:       s.Counts.Denied,
		Lost:         s.Counts.Lost,
		Agent:        s.Counts.Agent,
		Bytes:        s.Counts.Bytes,
		InputTokens:  s.Counts.InputTokens,
		OutputTokens: s.Counts.OutputTokens,
		CostUSD:      s.Counts.CostUSD,
	}
	for _, p := range s.Placeholders {
		r.Placeholders = append(r.Placeholders, placeholderRec(p))
	}
	if c := s.Chain; c != nil {
		r.Chain = &chainRec{Seq: c.Seq, Head: hex.EncodeToString(c.Head[:]), Meta: hex.EncodeToString(c.Meta[:]), Key: c.Key, Sig: c.Sig}
	}
	if !s.EndedAt.IsZero() {
		t := s.EndedAt.UTC()
		r.EndedAt = &t
	}
	b, err := json.Marshal(&r)
	if err != nil {
		// Only strings, ints, times and maps of those: cannot happen.
		panic(fmt.Sprintf("store: encoding a session record: %v", err))
	}
	return append([]byte{sessionVersion}, b...)
}

func decodeSession(v []byte) (Session, error) {
	if len(v) == 0 {
		return Session{}, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	if v[0] != sessionVersion {
		return Session{}, fmt.Errorf("%w %d (this build reads version %d; the store was written by a newer capsem, or is damaged)",
			ErrUnknownVersion, v[0], sessionVersion)
	}
	var r sessionRecord
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return Session{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	s := Session{
		ID:           r.ID,
		StartedAt:    r.StartedAt,
		Command:      r.Command,
		ExitCode:     r.ExitCode,
		PolicySHA256: r.PolicySHA256,
		Image:        r.Image,
		Host:         r.Host,
		Sandbox:      r.Sandbox,
		Counts: Counts{Events: r.Events, Kinds: r.Kinds, Allowed: r.Allowed, Denied: r.Denied, Lost: r.Lost, Agent: r.Agent, Bytes: r.Bytes,
			InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD},
	}
	for _, p := range r.Placeholders {
		s.Placeholders = append(s.Placeholders, Placeholder(p))
	}
	if r.EndedAt != nil {
		s.EndedAt = *r.EndedAt
	}
	if c := r.Chain; c != nil {
		s.Chain = &Chain{Seq: c.Seq, Key: c.Key, Sig: c.Sig}
		if err := unhex32(&s.Chain.Head, c.Head); err != nil {
			return Session{}, fmt.Errorf("%w: chain head: %v", ErrCorrupt, err)
		}
		if err := unhex32(&s.Chain.Meta, c.Meta); err != nil {
			return Session{}, fmt.Errorf("%w: chain meta: %v", ErrCorrupt, err)
		}
	}
	return s, nil
}

// unhex32 decodes 32 bytes of hex into h.
func unhex32(h *[32]byte, s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return fmt.Errorf("%q is not %d bytes of hex", s, len(h))
	}
	copy(h[:], b)
	return nil
}
