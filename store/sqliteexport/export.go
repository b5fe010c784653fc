package sqliteexport

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capsem/capsem/store"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// Options select what Export writes and how.
type Options struct {
	// Sessions are the ids of the sessions to export; empty means every
	// session in the store. An id that is not in the store is an error.
	Sessions []string
	// Scrub passes every text value through [Scrub].
	Scrub bool
	// Overwrite allows replacing an existing file at the destination
	// (atomically: readers see the old file or the new one, never a mix).
	Overwrite bool
}

// Result says what Export wrote.
type Result struct {
	Sessions        int // rows in sessions
	Events          int // stored events exported, all kinds
	NetEvents       int // rows in net_events
	DNSEvents       int // rows in dns_events
	ModelCalls      int // rows in model_calls: one per model_call event
	ToolCalls       int // rows in tool_calls: the model calls' tool calls
	ToolResponses   int // rows in tool_responses: the tool results the model calls' requests carried
	ExecEvents      int // rows in exec_events: commands the guest ran
	FSEvents        int // rows in fs_events: changes in the workspace
	AgentEvents     int // rows in agent_events: the guest agent went silent, was cut off, …
	RecordingEvents int // rows in recording_events: the store's budget, disk and gaps
	MCPCalls        int // rows in mcp_calls: MCP requests and their responses
	MCPLinks        int // tool_calls rows given an mcp_call_id: MCP tool calls linked to the MCP call that carried them
	OtherEvents     int // rows in other_events: kinds this build cannot decode
	Duration        time.Duration
}

// Export writes the sessions of st selected by opt, with all their events,
// to a new SQLite database at outPath. The file is built under a temporary
// name in the same directory and renamed to outPath only when complete;
// on error nothing is left behind and an existing outPath is untouched.
// Export only reads st, which may be open read-only or still being written
// (a session being written is exported as far as its synced events go).
func Export(ctx context.Context, st *store.Store, outPath string, opt Options) (res Result, err error) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if st == nil {
		return res, errors.New("sqliteexport: no store given")
	}
	if outPath == "" {
		return res, errors.New("sqliteexport: no output path given")
	}
	if !opt.Overwrite {
		if err := refuseExisting(outPath); err != nil {
			return res, err
		}
	}
	sessions, err := selectSessions(st, opt.Sessions)
	if err != nil {
		return res, err
	}

	err = writeAtomically(outPath, opt.Overwrite, func(tmp string) error {
		return build(ctx, st, tmp, sessions, opt, &res)
	})
	return res, err
}

// selectSessions returns the sessions to export, oldest first (ties by id).
func selectSessions(st *store.Store, ids []string) ([]store.Session, error) {
	var out []store.Session
	if len(ids) == 0 {
		all, err := st.Sessions()
		if err != nil {
			return nil, fmt.Errorf("sqliteexport: list sessions: %w", err)
		}
		out = all
	} else {
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			s, err := st.Session(id)
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("sqliteexport: session %q is not in the store (list them with `capsem sessions`): %w", id, err)
			}
			if err != nil {
				return nil, fmt.Errorf("sqliteexport: %w", err)
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b store.Session) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// fileURI returns path as a file: URI, so that characters the driver or
// SQLite would read as URI syntax ('?', '#', '%') are taken literally.
func fileURI(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	path = filepath.ToSlash(path)
	if !strings.HasPrefix(path, "/") {
		path = "/" + path // a Windows drive letter
	}
	return (&url.URL{Scheme: "file", Path: path}).String()
}

// build writes the whole database into the fresh file path.
func build(ctx context.Context, st *store.Store, path string, sessions []store.Session, opt Options, res *Result) error {
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		return fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	defer conn.Close()

	// The file is new and is renamed into place only when complete, so
	// neither a rollback journal nor syncs are needed while building it.
	for _, p := range []string{
		"PRAGMA page_size = 8192",
		"PRAGMA journal_mode = OFF",
		"PRAGMA synchronous = OFF",
		"PRAGMA locking_mode = EXCLUSIVE",
		"PRAGMA temp_store = MEMORY",
		"PRAGMA cache_size = -131072", // 128 MiB: index builds sort in memory
		fmt.Sprintf("PRAGMA application_id = %d", ApplicationID),
		fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion),
	} {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			return fmt.Errorf("sqliteexport: %s: %w", p, err)
		}
	}

	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqliteexport: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for _, t := range schema {
		if _, err := tx.ExecContext(ctx, t.createSQL()); err != nil {
			return fmt.Errorf("sqliteexport: create table: %w", err)
		}
	}

	conv := newConverter(opt.Scrub, sessions)
	ids := make([]string, len(sessions))
	insSession, err := tx.PrepareContext(ctx, sessionsTable.insertSQL())
	if err != nil {
		return fmt.Errorf("sqliteexport: prepare: %w", err)
	}
	defer insSession.Close()
	for i := range sessions {
		ids[i] = conv.sessionID(sessions[i].ID, i+1)
		row := sessionsTable.args(conv, &source{session: ids[i], sess: &sessions[i]})
		if _, err := insSession.ExecContext(ctx, row...); err != nil {
			return fmt.Errorf("sqliteexport: session %q: %w", sessions[i].ID, err)
		}
	}
	res.Sessions = len(sessions)

	if err := copyEvents(ctx, st, tx, sessions, ids, conv, res); err != nil {
		return err
	}

	for _, q := range sessionCounts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqliteexport: session counts: %w", err)
		}
	}
	for _, ix := range indexes() {
		q := ix.createSQL()
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqliteexport: %s: %w", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqliteexport: commit: %w", err)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("sqliteexport: close %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("sqliteexport: close %s: %w", path, err)
	}
	return nil
}
