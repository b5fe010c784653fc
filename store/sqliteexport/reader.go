package sqliteexport

// The reader of exported files: it gives back the sessions and events of a
// file that Export wrote, as the store gives them (store.Session,
// store.Event), so that what reads a store — the session viewer, package
// ui, and capsem inspect — can read a file someone sent instead. Such a
// file is not trusted: open.go says how it is opened and what is refused.
// The reader must never write to the file: it is opened read-only and
// immutable, query_only is on, nothing here runs an INSERT, UPDATE, DDL or
// a PRAGMA that sets anything, and a file of another schema version is
// refused rather than "upgraded". It must also never hold a whole session,
// or every session, in memory: the events of a session are read table by
// table in chunks of rows and merged by seq (readrows.go), and Sessions
// lists at most MaxSessions.
//
// What an export loses, and so what the reader cannot give back, is listed
// in readrows.go above the row decoders.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/capsem/capsem/store"
)

// Reader reads the sessions and events of an exported file. Its methods
// are those of the store's readers (Sessions, Session, EventsAfter) and
// may be called from several goroutines.
type Reader struct {
	db   *sql.DB
	conn *sql.Conn // the one connection, with the limits of open.go
	path string
}

// OpenReader opens the exported file at path read-only. It fails when the
// file is not a capsem export, was written with another schema version
// than this build's [SchemaVersion], has any table, index, view or
// trigger an export of this build does not have, or is damaged (open.go).
func OpenReader(path string) (*Reader, error) {
	db, conn, err := openChecked(path)
	if err != nil {
		return nil, err
	}
	return &Reader{db: db, conn: conn, path: path}, nil
}

// QueryContext runs a query of the caller's on the file, through the
// reader's connection and its limits: capsem inspect's report and checks.
// The connection is read-only.
func (r *Reader) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.conn.QueryContext(ctx, query, args...)
}

// QueryRowContext is QueryContext of one row.
func (r *Reader) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return r.conn.QueryRowContext(ctx, query, args...)
}

// Close closes the file.
func (r *Reader) Close() error {
	err := r.conn.Close()
	if dbErr := r.db.Close(); err == nil {
		err = dbErr
	}
	if err != nil {
		return fmt.Errorf("sqliteexport: close %s: %w", r.path, err)
	}
	return nil
}

// sessionColumns are the columns of sessions a store.Session is made of,
// in the order scanSession reads them.
const sessionColumns = `id, started_at, started_at_ms, ended_at, ended_at_ms, command, exit_code,
	policy_sha256, image, host, sandbox, events, allowed, denied, lost,
	input_tokens, output_tokens, cost_usd, dns, net, model_calls, exec, fs, agent,
	chain_seq, chain_head, chain_meta, chain_key, chain_sig`

// sessionsBytes bounds the text of the sessions Sessions lists: past it
// the list ends, as at MaxSessions. A session's row is a few hundred
// bytes, its command line the most of it: 64 MiB is MaxSessions sessions
// of 64 KiB command lines each.
const sessionsBytes = 64 << 20

// Sessions returns the newest sessions of the file, newest (latest
// StartedAt) first, ties by id as the store orders them: at most
// MaxSessions, and fewer when their text passes sessionsBytes.
// SessionCount says how many the file holds.
func (r *Reader) Sessions() ([]store.Session, error) {
	rows, err := r.conn.QueryContext(context.Background(),
		"SELECT "+sessionColumns+" FROM sessions ORDER BY started_at DESC, id DESC LIMIT ?", MaxSessions)
	if err != nil {
		return nil, fmt.Errorf("sqliteexport: list sessions: %w", err)
	}
	defer rows.Close()
	var out []store.Session
	seen := map[string]bool{}
	size := 0
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		// An index that points at one row again and again would list it
		// as often: a session id is the sessions table's key.
		if seen[s.ID] {
			return nil, fmt.Errorf("sqliteexport: session %q is in %s twice: the file was not written by capsem export", s.ID, r.path)
		}
		seen[s.ID] = true
		if size += sessionSize(s); size > sessionsBytes && len(out) > 0 {
			break
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqliteexport: list sessions: %w", explain(err))
	}
	rows.Close()
	if err := r.addCounts(out, ""); err != nil {
		return nil, err
	}
	return out, nil
}

// sessionSize is about what s holds in memory.
func sessionSize(s store.Session) int {
	n := 256 + len(s.ID) + len(s.PolicySHA256) + len(s.Image) + len(s.Host) + len(s.Sandbox)
	for _, w := range s.Command {
		n += 16 + len(w)
	}
	return n
}

// SessionCount returns how many sessions the file holds, listed by
// Sessions or not.
func (r *Reader) SessionCount() (int64, error) {
	var n int64
	if err := r.conn.QueryRowContext(context.Background(), "SELECT count(*) FROM sessions").Scan(&n); err != nil {
		return 0, fmt.Errorf("sqliteexport: count sessions: %w", err)
	}
	return n, nil
}

// Session returns the record of session id, or an error wrapping
// store.ErrNotFound.
func (r *Reader) Session(id string) (store.Session, error) {
	rows, err := r.conn.QueryContext(context.Background(), "SELECT "+sessionColumns+" FROM sessions WHERE id = ?", id)
	if err != nil {
		return store.Session{}, fmt.Errorf("sqliteexport: session %q: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return store.Session{}, fmt.Errorf("sqliteexport: session %q: %w", id, explain(err))
		}
		return store.Session{}, fmt.Errorf("sqliteexport: session %q is not in %s: %w", id, r.path, store.ErrNotFound)
	}
	s, err := scanSession(rows)
	if err != nil {
		return store.Session{}, err
	}
	rows.Close()
	out := []store.Session{s}
	if err := r.addCounts(out, id); err != nil {
		return store.Session{}, err
	}
	return out[0], nil
}

// scanSession makes a store.Session of a row of sessionColumns. Counts.Kinds
// gets the kinds the sessions table counts; addCounts adds the others.
func scanSession(rows *sql.Rows) (store.Session, error) {
	vals, err := scanAll(rows, 29)
	if err != nil {
		return store.Session{}, err
	}
	return sessionOf(&cols{vals: vals})
}

// scanSessionScrubbed is scanSession of a row of sessionColumns and
// scrubbed.
func scanSessionScrubbed(rows *sql.Rows) (store.Session, bool, error) {
	vals, err := scanAll(rows, 30)
	if err != nil {
		return store.Session{}, false, err
	}
	c := &cols{vals: vals}
	s, err := sessionOf(c)
	return s, c.bool(), err
}

func scanAll(rows *sql.Rows, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("sqliteexport: read a session: %w", err)
	}
	return vals, nil
}

// sessionOf reads a store.Session from the columns of sessionColumns.
func sessionOf(c *cols) (store.Session, error) {
	var s store.Session
	s.ID = c.str()
	s.StartedAt = c.time()
	s.EndedAt = c.time()
	if err := c.json(&s.Command); err != nil {
		return store.Session{}, fmt.Errorf("sqliteexport: session %q: command: %w", s.ID, err)
	}
	if v := c.next(); v != nil {
		code := int(toInt(v))
		s.ExitCode = &code
	}
	s.PolicySHA256 = c.str()
	s.Image = c.str()
	s.Host = c.str()
	s.Sandbox = c.str()
	s.Counts.Events = c.int()
	s.Counts.Allowed = c.int()
	s.Counts.Denied = c.int()
	s.Counts.Lost = c.int()
	s.Counts.InputTokens = c.int()
	s.Counts.OutputTokens = c.int()
	s.Counts.CostUSD = c.float()
	for _, k := range []store.Kind{store.KindDNS, store.KindNet, store.KindModelCall, store.KindExec, store.KindFS, store.KindAgent} {
		if n := c.int(); n != 0 {
			if s.Counts.Kinds == nil {
				s.Counts.Kinds = map[store.Kind]int64{}
			}
			s.Counts.Kinds[k] = n
		}
	}
	s.Chain = c.chain()
	if c.err != nil {
		return store.Session{}, fmt.Errorf("sqliteexport: session %q: %w", s.ID, c.err)
	}
	return s, nil
}

// countQueries count, per session, what the sessions table has no column
// for: the kinds of the tables without one (other_events by its kind
// column), and the agent events per state, weighted by their count (as the
// store's Counts.Agent). Each is one pass over an index or a small table.
var countQueries = []struct {
	query string
	agent bool // the key is an agent state (Counts.Agent), not a kind
}{
	{query: "SELECT session_id, 'mcp_call', count(*) FROM mcp_calls %s GROUP BY session_id"},
	{query: "SELECT session_id, 'recording', count(*) FROM recording_events %s GROUP BY session_id"},
	{query: "SELECT session_id, kind, count(*) FROM other_events %s GROUP BY session_id, kind"},
	{query: "SELECT session_id, coalesce(state, ''), sum(max(count, 1)) FROM agent_events %s GROUP BY session_id, state", agent: true},
}

// addCounts adds to the Counts of sessions what countQueries count: of
// session id alone when id is set, else of the sessions Sessions lists.
func (r *Reader) addCounts(sessions []store.Session, id string) error {
	byID := make(map[string]*store.Session, len(sessions))
	for i := range sessions {
		byID[sessions[i].ID] = &sessions[i]
	}
	where := "WHERE session_id IN (SELECT id FROM sessions ORDER BY started_at DESC, id DESC LIMIT ?)"
	args := []any{MaxSessions}
	if id != "" {
		where, args = "WHERE session_id = ?", []any{id}
	}
	for _, q := range countQueries {
		err := func() error {
			rows, err := r.conn.QueryContext(context.Background(), fmt.Sprintf(q.query, where), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var sid, key string
				var n int64
				if err := rows.Scan(&sid, &key, &n); err != nil {
					return err
				}
				s := byID[sid]
				if s == nil || n == 0 {
					continue
				}
				if q.agent {
					if s.Counts.Agent == nil {
						s.Counts.Agent = map[string]int64{}
					}
					s.Counts.Agent[key] += n
					continue
				}
				if key == "" {
					key = "unknown"
				}
				if s.Counts.Kinds == nil {
					s.Counts.Kinds = map[store.Kind]int64{}
				}
				s.Counts.Kinds[store.Kind(key)] += n
			}
			return rows.Err()
		}()
		if err != nil {
			return fmt.Errorf("sqliteexport: session counts: %w", err)
		}
	}
	return nil
}

// EventsAfter calls fn with the events of session id whose Seq is above
// after, in Seq order, until fn returns an error, which it returns as is.
// An unknown session is an error wrapping store.ErrNotFound. The events are
// read a chunk of rows per table at a time, so that a session of any size
// takes bounded memory; the Event passed to fn is fn's to keep.
func (r *Reader) EventsAfter(id string, after uint64, fn func(store.Event) error) error {
	if err := r.exists(id); err != nil {
		return err
	}
	if after >= math.MaxInt64 {
		return nil // no seq is above: SQLite's integers stop at MaxInt64
	}
	m := newMerger(r.conn, id, int64(after))
	for {
		ev, ok, err := m.next()
		if err != nil {
			return fmt.Errorf("sqliteexport: session %q: %w", id, explain(err))
		}
		if !ok {
			return nil
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// exists returns nil when session id is in the file, else an error
// wrapping store.ErrNotFound.
func (r *Reader) exists(id string) error {
	var one int
	err := r.conn.QueryRowContext(context.Background(), "SELECT 1 FROM sessions WHERE id = ?", id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqliteexport: session %q is not in %s: %w", id, r.path, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqliteexport: session %q: %w", id, err)
	}
	return nil
}

// Events is EventsAfter from the first event.
func (r *Reader) Events(id string, fn func(store.Event) error) error {
	return r.EventsAfter(id, 0, fn)
}
