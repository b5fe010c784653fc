package sqliteexport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/capsem/capsem/store"
)

// ChainResult is what VerifyChain found for one session of an export.
type ChainResult struct {
	Session string
	Status  store.ChainStatus
	// Scrubbed: the export was made with --scrub and holds no records, so
	// the chain's links and seal are checked but not the rows' contents.
	Scrubbed bool
	// Err is nil when the session verifies. Otherwise it wraps
	// store.ErrChainBroken and names the first row that does not match:
	// its table, id and seq.
	Err error
}

// VerifyChain checks session id of the export q: that each of its event
// rows is what its record (the stored value it was made from) makes, that
// the records' hashes chain from the first seq to the last with none
// missing, and that the sessions row's head and seal match them. It
// returns an error only when the file cannot be read; what it finds is in
// the result. Whose key sealed is the caller's to judge
// (ChainStatus.Key).
func VerifyChain(ctx context.Context, q Querier, id string) (ChainResult, error) {
	return verifySession(ctx, q, id)
}

// chainRow is one event row's place in its session's chain.
type chainRow struct {
	table     string
	id        int64
	seq       uint64
	prev, sum *[sha256.Size]byte
}

func (r chainRow) String() string {
	return fmt.Sprintf("%s row %d (seq %d)", r.table, r.id, r.seq)
}

func verifySession(ctx context.Context, q Querier, id string) (ChainResult, error) {
	res := ChainResult{Session: id}
	sess, scrubbed, err := chainSession(ctx, q, id)
	if err != nil {
		return res, err
	}
	res.Scrubbed = scrubbed
	broken := func(row chainRow, format string, a ...any) (ChainResult, error) {
		res.Err = fmt.Errorf("sqliteexport: session %s: %w at %s: %s", id, store.ErrChainBroken, row, fmt.Sprintf(format, a...))
		return res, nil
	}

	// The rows' contents against their records, table by table; the first
	// mismatch, by seq, is kept to be reported if the chain itself does
	// not break earlier.
	var first *chainRow
	var firstWhy string
	if !scrubbed {
		conv := newConverter(false, nil)
		for _, t := range schema {
			if t.seq != uniqueSeq {
				continue
			}
			row, why, err := checkRecords(ctx, q, conv, t, id)
			if err != nil {
				return res, err
			}
			if why != "" && (first == nil || row.seq < first.seq) {
				first, firstWhy = &row, why
			}
		}
	}

	// The chain, in seq order across the tables.
	rows, err := chainRows(ctx, q, id)
	if err != nil {
		return res, err
	}
	c := store.NewChainCheck(&sess)
	c.MetaScrubbed = scrubbed
	for _, row := range rows {
		if first != nil && first.seq <= row.seq {
			return broken(*first, "%s", firstWhy)
		}
		if row.sum == nil {
			return broken(row, "sha256 is NULL (the export writes it for every event)")
		}
		if err := c.AddHashes(row.seq, row.prev, *row.sum); err != nil {
			var ce *store.ChainError
			if !errors.As(err, &ce) {
				return res, err
			}
			return broken(row, "%s", ce.Why)
		}
	}
	if first != nil {
		return broken(*first, "%s", firstWhy)
	}
	res.Status, err = c.End()
	if err != nil {
		res.Err = fmt.Errorf("sqliteexport: sessions row %q: %w", id, err)
	}
	return res, nil
}

// chainSession reads the sessions row of id as a store.Session, the chain
// and scrubbed columns with it.
func chainSession(ctx context.Context, q Querier, id string) (store.Session, bool, error) {
	rows, err := q.QueryContext(ctx, "SELECT "+sessionColumns+", scrubbed FROM sessions WHERE id = ?", id)
	if err != nil {
		return store.Session{}, false, fmt.Errorf("sqliteexport: session %q: %w", id, explain(err))
	}
	defer rows.Close()
	if !rows.Next() {
		return store.Session{}, false, fmt.Errorf("sqliteexport: session %q: %w", id, errors.Join(rows.Err(), store.ErrNotFound))
	}
	s, scrubbed, err := scanSessionScrubbed(rows)
	return s, scrubbed, err
}

// chainRows are the chain columns of every event row of session id, in
// seq order.
func chainRows(ctx context.Context, q Querier, id string) ([]chainRow, error) {
	var parts []string
	var args []any
	for _, t := range schema {
		if t.seq == uniqueSeq {
			parts = append(parts, "SELECT '"+t.name+"', id, seq, prev_sha256, sha256 FROM "+t.name+" WHERE session_id = ?")
			args = append(args, id)
		}
	}
	rows, err := q.QueryContext(ctx, strings.Join(parts, " UNION ALL ")+" ORDER BY 3, 2", args...)
	if err != nil {
		return nil, fmt.Errorf("sqliteexport: session %q: read the hash chain: %w", id, explain(err))
	}
	defer rows.Close()
	var out []chainRow
	for rows.Next() {
		var r chainRow
		var seq int64
		var prev, sum sql.NullString
		if err := rows.Scan(&r.table, &r.id, &seq, &prev, &sum); err != nil {
			return nil, fmt.Errorf("sqliteexport: session %q: read the hash chain: %w", id, err)
		}
		r.seq = uint64(seq)
		var ok bool
		if r.prev, ok = unhexNull(prev); !ok {
			return nil, fmt.Errorf("sqliteexport: session %s: %w at %s: prev_sha256 is not 32 bytes of hex", id, store.ErrChainBroken, r)
		}
		if r.sum, ok = unhexNull(sum); !ok {
			return nil, fmt.Errorf("sqliteexport: session %s: %w at %s: sha256 is not 32 bytes of hex", id, store.ErrChainBroken, r)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func unhexNull(s sql.NullString) (*[sha256.Size]byte, bool) {
	if !s.Valid {
		return nil, true
	}
	var h [sha256.Size]byte
	b, err := hex.DecodeString(s.String)
	if err != nil || len(b) != len(h) {
		return nil, false
	}
	copy(h[:], b)
	return &h, true
}

// checkRecords compares each row of t in session id with the row its
// record makes (the export's own conversion, unscrubbed), and its
// prev_sha256 and sha256 with the record's. It returns the first row, by
// id (and so by seq), that differs, and how; why is "" when none does.
// A model call's tool_calls and tool_responses rows are checked with it.
func checkRecords(ctx context.Context, q Querier, conv *converter, t *table, id string) (chainRow, string, error) {
	var names []string
	for _, col := range t.columns {
		if col.value != nil && !isChainColumnName(col.name) {
			names = append(names, col.name)
		}
	}
	rows, err := q.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+", prev_sha256, sha256, record FROM "+t.name+
		" WHERE session_id = ? ORDER BY id", id)
	if err != nil {
		return chainRow{}, "", fmt.Errorf("sqliteexport: session %q: read %s: %w", id, t.name, explain(err))
	}
	defer rows.Close()
	vals := make([]any, len(names)+3)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return chainRow{}, "", fmt.Errorf("sqliteexport: session %q: read %s: %w", id, t.name, err)
		}
		row := chainRow{table: t.name, id: toInt(vals[0]), seq: uint64(toInt(vals[2]))}
		if why := checkRecord(ctx, q, conv, t, id, row, names, vals); why != "" {
			return row, why, nil
		}
	}
	return chainRow{}, "", rows.Err()
}

// checkRecord checks one row (vals: names, then prev_sha256, sha256,
// record) against its record.
func checkRecord(ctx context.Context, q Querier, conv *converter, t *table, id string, row chainRow, names []string, vals []any) string {
	n := len(names)
	rec, _ := vals[n+2].([]byte)
	if rec == nil {
		if s, ok := vals[n+2].(string); ok {
			rec = []byte(s)
		}
	}
	if rec == nil {
		return "record is NULL in an export that is not scrubbed"
	}
	sum := store.ValueHash(rec)
	if got := textOf(vals[n+1]); got != hex.EncodeToString(sum[:]) {
		return "sha256 is not the hash of record"
	}
	prev, ok := store.PrevOf(rec)
	if got := textOf(vals[n]); ok && got != hex.EncodeToString(prev[:]) || !ok && vals[n] != nil {
		return "prev_sha256 is not the prev its record carries"
	}
	ev := store.Event{Seq: row.seq}
	if err := store.DecodeEvent(rec, &ev); err != nil {
		return "record does not decode: " + err.Error()
	}
	// The rows the record makes, as the export made them: its own row,
	// then a model call's tool calls and results.
	type made struct {
		t    *table
		args []any
	}
	var want []made
	src := &source{id: row.id, session: id, ev: &ev, raw: rec}
	_ = eventRows(src, func(mt *table, s *source) error {
		want = append(want, made{mt, mt.args(conv, s)})
		return nil
	}, nil, &Result{})
	if len(want) == 0 || want[0].t != t {
		return fmt.Sprintf("its record is a %s event, not a row of %s", ev.Kind, t.name)
	}
	if col := differs(t, want[0].args, vals[:n]); col != "" {
		return col + " differs from its record"
	}
	// The children: their ids follow in export order, so they are read
	// in id order and given the model call's row as theirs.
	for _, child := range []*table{toolCalls, toolResponses} {
		var exp [][]any
		for _, m := range want[1:] {
			if m.t == child {
				exp = append(exp, m.args)
			}
		}
		got, err := childRows(ctx, q, child, id, row.seq)
		if err != nil {
			return err.Error()
		}
		if len(got) != len(exp) {
			return fmt.Sprintf("its record makes %d %s rows, the export has %d", len(exp), child.name, len(got))
		}
		for i := range got {
			// id and model_call_id are the export's numbering: take them
			// from the row, check the rest.
			idCol, mcCol := 0, columnIndex(child, "model_call_id")
			exp[i][idCol] = got[i][idCol]
			if toInt(got[i][mcCol]) != row.id {
				return fmt.Sprintf("%s row %v does not point at it", child.name, got[i][idCol])
			}
			exp[i][mcCol] = got[i][mcCol]
			if col := differs(child, exp[i], got[i]); col != "" {
				return fmt.Sprintf("%s row %v: %s differs from its record", child.name, got[i][idCol], col)
			}
		}
	}
	return ""
}

// childRows are the inserted columns of the rows of t at (id, seq), by id.
func childRows(ctx context.Context, q Querier, t *table, id string, seq uint64) ([][]any, error) {
	var names []string
	for _, col := range t.columns {
		if col.value != nil {
			names = append(names, col.name)
		}
	}
	rows, err := q.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+t.name+" WHERE session_id = ? AND seq = ? ORDER BY id", id, int64(seq))
	if err != nil {
		return nil, fmt.Errorf("sqliteexport: session %q: read %s: %w", id, t.name, explain(err))
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// differs names the first inserted column of t whose value in got (as
// read back) is not want's (as the export binds it); "" when none.
func differs(t *table, want, got []any) string {
	i := 0
	for _, col := range t.columns {
		if col.value == nil || isChainColumnName(col.name) {
			continue
		}
		if !sameValue(want[i], got[i]) {
			return col.name
		}
		i++
	}
	return ""
}

// sameValue compares a value as bound with one as read back from SQLite:
// integers of any width as int64, text as text, blobs as bytes, and a
// REAL by its value.
func sameValue(a, b any) bool {
	na, aNum := number(a)
	nb, bNum := number(b)
	switch {
	case a == nil || b == nil:
		return a == nil && b == nil
	case aNum && bNum:
		ia, aInt := integer(a)
		ib, bInt := integer(b)
		if aInt && bInt {
			return ia == ib
		}
		return na == nb || math.IsNaN(na) && math.IsNaN(nb)
	case aNum != bNum:
		return false
	}
	if ab, ok := a.([]byte); ok {
		bb, ok := b.([]byte)
		return ok && bytes.Equal(ab, bb)
	}
	return textOf(a) == textOf(b)
}

func number(v any) (float64, bool) {
	if i, ok := integer(v); ok {
		return float64(i), true
	}
	f, ok := v.(float64)
	return f, ok
}

func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func textOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func columnIndex(t *table, name string) int {
	i := 0
	for _, col := range t.columns {
		if col.value == nil {
			continue
		}
		if col.name == name {
			return i
		}
		i++
	}
	panic("sqliteexport: no inserted column " + name + " in " + t.name)
}
