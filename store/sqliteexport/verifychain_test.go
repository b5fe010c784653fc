package sqliteexport

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

var chainKey = ed25519.NewKeyFromSeed([]byte("sqliteexport chain test seed, 32"))

// sealedExport exports one session of every kind of event, sealed with
// chainKey, and returns a writable copy of the file.
func sealedExport(t *testing.T, opt Options) (*sql.DB, string) {
	t.Helper()
	st, err := store.OpenWith(t.TempDir(), store.Options{SealKey: chainKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	code := 3
	addSession(t, st, fullSession("s1", t0), fullEvents(), true, &code)
	path, _ := export(t, st, opt)
	return openRW(t, path), path
}

func verifyOne(t *testing.T, db *sql.DB) ChainResult {
	t.Helper()
	res, err := VerifyChain(context.Background(), db, "s1")
	if err != nil {
		t.Fatalf("VerifyChain: %v", err)
	}
	return res
}

func TestVerifyChainGenuine(t *testing.T) {
	db, _ := sealedExport(t, Options{})
	r := verifyOne(t, db)
	if r.Err != nil || !r.Status.Chained || r.Scrubbed || r.Status.Events != uint64(len(fullEvents())) || !r.Status.Key.Equal(chainKey.Public()) {
		t.Fatalf("genuine export: %+v", r)
	}
	// Scrubbed: no records, so the links and the seal only.
	db, _ = sealedExport(t, Options{Scrub: true})
	r = verifyOne(t, db)
	if r.Err != nil || !r.Status.Chained || !r.Scrubbed || !r.Status.Key.Equal(chainKey.Public()) {
		t.Fatalf("scrubbed export: %+v", r)
	}
}

// TestVerifyChainTampered: an UPDATE or DELETE of any part of a row is
// found, and the first row that does not match is named.
func TestVerifyChainTampered(t *testing.T) {
	other := ed25519.NewKeyFromSeed([]byte("an attacker's key, not the seal."))
	cases := []struct {
		why    string
		sql    string
		wantIn string
	}{
		{"one byte of a text column", "UPDATE dns_events SET qname = 'b' || substr(qname, 2) WHERE id = 1",
			"at dns_events row 1 (seq 1): qname differs from its record"},
		{"a number", "UPDATE net_events SET status_code = 201 WHERE id = 1",
			"at net_events row 1 (seq 2): status_code differs from its record"},
		{"another value", "UPDATE exec_events SET dir = '/etc' WHERE id = 1",
			"at exec_events row 1"},
		{"a tool call's argument, which its model call's record makes", "UPDATE tool_calls SET tool_name = 'rm' WHERE id = 1",
			"at model_calls row 1"},
		{"one byte of a record", "UPDATE net_events SET record = CAST(substr(record, 1, length(record) - 1) || x'00' AS BLOB) WHERE id = 1",
			"at net_events row 1 (seq 2): sha256 is not the hash of record"},
		{"a record and its hash: the next event's prev no longer matches", "UPDATE dns_events SET record = NULL, sha256 = '" + strings.Repeat("ab", 32) + "' WHERE id = 1",
			"at dns_events row 1 (seq 1): record is NULL"},
		{"a row deleted", "DELETE FROM net_events WHERE id = 1",
			"at model_calls row 1 (seq 3): events 2 to 2 are missing"},
		{"the last row deleted", "DELETE FROM recording_events WHERE seq = (SELECT max(seq) FROM recording_events)",
			"the record's head covers events up to"},
		{"the exit code", "UPDATE sessions SET exit_code = 0",
			"signature does not verify"},
		{"the command", `UPDATE sessions SET command = '["true"]'`,
			"command, policy, image, host or sandbox is not what was recorded"},
		{"the seal made unsigned", "UPDATE sessions SET chain_key = NULL, chain_sig = NULL",
			""}, // reported as unsigned: Key nil, which the caller refuses
		{"marked scrubbed to skip the contents, and a row changed", "UPDATE sessions SET scrubbed = 1; UPDATE dns_events SET qname = 'evil.example' WHERE id = 1",
			""}, // reported as Scrubbed: the caller says the contents were not checked
	}
	for _, c := range cases {
		db, _ := sealedExport(t, Options{})
		for _, q := range strings.Split(c.sql, "; ") {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %s: %v", c.why, q, err)
			}
		}
		r := verifyOne(t, db)
		if c.wantIn == "" {
			if r.Err != nil || (r.Status.Key != nil && !r.Scrubbed) {
				t.Errorf("%s: %+v; want no error, and unsigned or scrubbed said", c.why, r)
			}
			continue
		}
		if !errors.Is(r.Err, store.ErrChainBroken) || !strings.Contains(r.Err.Error(), c.wantIn) {
			t.Errorf("%s: %v; want %q", c.why, r.Err, c.wantIn)
		}
	}

	// Re-signed with another key after an edit: the chain holds, and the
	// key reported is the other one, which the caller does not trust.
	db, _ := sealedExport(t, Options{})
	sess, _, err := chainSession(context.Background(), db, "s1")
	if err != nil {
		t.Fatal(err)
	}
	sess.ExitCode = new(0)
	sess.Chain.Sig = ed25519.Sign(other, store.SealMessage(&sess))
	if _, err := db.Exec("UPDATE sessions SET exit_code = 0, chain_key = ?, chain_sig = ?",
		hexOf(other.Public().(ed25519.PublicKey)), hexOf(sess.Chain.Sig)); err != nil {
		t.Fatal(err)
	}
	r := verifyOne(t, db)
	if r.Err != nil || !r.Status.Key.Equal(other.Public()) {
		t.Errorf("re-signed: %+v; want it to verify under the other key, and say so", r)
	}
}

func hexOf(b []byte) string {
	return chainHex(&store.Chain{Sig: b}, func(c *store.Chain) []byte { return c.Sig }).(string)
}
