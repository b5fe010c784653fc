package sqliteexport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Opening a file someone sent. Whoever wrote it chose every byte, so the
// reader trusts nothing SQLite would run or follow on its behalf:
//
//   - Only the exporter's own schema is read: sqlite_schema must hold
//     exactly the tables and indexes that an export of this build has, with
//     the same SQL, and nothing else. A view can compute rows without end
//     (a recursive one spins forever), a generated column can make 50 MB of
//     every row of an 8 KiB file, a trigger or an index of another's
//     choosing runs or steers what capsem did not write; all of them change
//     sqlite_schema, so all are refused, named, before a row is read.
//   - The file is opened read-only and immutable (no lock, no journal, no
//     write, and no hot journal beside it is rolled back into it), with
//     query_only and trusted_schema off.
//   - PRAGMA quick_check must pass: every page belongs to one b-tree at one
//     place. A page pointed at twice (an interior page whose children are
//     all one page, an overflow chain shared by many rows) makes a scan
//     read the same bytes again and again — a few levels of it outlast
//     anyone — while the checks above all pass. With every page in one
//     place, each query reads the file at most once per scan: time and
//     memory follow the file's size. The check reads the whole file once:
//     0.9 to 1.7 s for an export of 1M events (312 MiB) on a shared
//     2-core machine, where the reader's open took milliseconds before.
//   - No row longer than maxRowBytes is read (SQLITE_LIMIT_LENGTH).
//
// What the reader then holds is bounded apart from the file: Sessions
// lists at most MaxSessions and sessionsBytes, and the events of a session
// are read in chunks of at most maxChunk rows and chunkBytes (readrows.go).

// maxRowBytes is SQLITE_LIMIT_LENGTH on the reader's connection: the
// longest row, and so the longest value, it reads; a longer one is an
// error ("string or blob too big"). The longest row capsem export writes
// is a net_events row: two body previews of at most 1 MiB each (mitm's
// preview_bytes cannot be set higher), each invalid UTF-8 byte 3 bytes as
// U+FFFD, and the headers as JSON, a byte at most 6 (\ufffd). The guest's
// request headers stop at the MITM's 1 MiB; 64 MiB leaves an upstream's
// response headers 9 MiB of the worst kind — more than any server sends —
// and holds a single row to a few times what a page of the viewer shows.
const maxRowBytes = 64 << 20

// MaxSessions is the most sessions [Reader.Sessions] lists, the newest:
// the session viewer renders its list as one page, about 1 KiB of HTML a
// session. A file of more (an export of years of runs, or one made to
// exhaust the reader) lists its newest 1,000; [Reader.SessionCount] says
// how many it holds, and [Reader.Session] opens any of them by id.
const MaxSessions = 1000

// Querier runs SQL: *sql.DB, *sql.Conn and *Reader are ones.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// openChecked opens the export at path for reading, with the limits
// above, and refuses it unless it is an export of this build's schema.
// The returned connection is the only one its DB opens.
func openChecked(path string) (*sql.DB, *sql.Conn, error) {
	if path == "" {
		return nil, nil, errors.New("sqliteexport: no file given")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("sqliteexport: %w", err)
	}
	if !fi.Mode().IsRegular() {
		// A FIFO would block the open until someone writes to it.
		return nil, nil, fmt.Errorf("sqliteexport: %s is not a regular file: give the file capsem export wrote", path)
	}
	db, err := sql.Open("sqlite", fileURI(path)+
		"?mode=ro&immutable=1&_query_only=1&_pragma=trusted_schema(0)&_pragma=cell_size_check(1)")
	if err != nil {
		return nil, nil, fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	// The limit is set on one connection: every query goes through it,
	// so that no other, unlimited, is ever opened.
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	if err := checkFile(ctx, conn, path); err != nil {
		conn.Close()
		db.Close()
		return nil, nil, err
	}
	return db, conn, nil
}

// checkFile sets the connection's limit and refuses a file that is not an
// export of this build: another application's database, another schema
// version, another schema, a damaged file.
func checkFile(ctx context.Context, conn *sql.Conn, path string) error {
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, maxRowBytes); err != nil {
		return fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	var app, version int64
	if err := conn.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return fmt.Errorf("sqliteexport: %s is not a capsem export (or one from another version): %w", path, err)
	}
	if app != ApplicationID {
		return fmt.Errorf("sqliteexport: %s is not a capsem export (application_id %#x, want %#x)", path, app, ApplicationID)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	if version != SchemaVersion {
		newer := "an older"
		if version > SchemaVersion {
			newer = "a newer"
		}
		return fmt.Errorf("sqliteexport: %s has schema version %d and this capsem reads version %d: it was exported by %s capsem; "+
			"export the session again with this capsem (capsem export) or read it with the capsem that wrote it",
			path, version, SchemaVersion, newer)
	}
	if diffs, err := schemaDiffs(ctx, conn); err != nil {
		return fmt.Errorf("sqliteexport: %s is not a capsem export (or one from another version): %w", path, err)
	} else if len(diffs) > 0 {
		return fmt.Errorf("sqliteexport: %s is not a capsem export (or one from another version): %s; "+
			"capsem reads only the tables and indexes capsem export writes, nothing added or changed", path, strings.Join(diffs, "; "))
	}
	var verdict string
	if err := conn.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&verdict); err != nil {
		return fmt.Errorf("sqliteexport: %s is damaged: %w", path, err)
	}
	if verdict != "ok" {
		verdict = strings.TrimPrefix(strings.Join(strings.Fields(verdict), " "), "*** in database main *** ")
		return fmt.Errorf("sqliteexport: %s is damaged (PRAGMA quick_check: %s): not read", path, verdict)
	}
	return nil
}

// explain adds to an error of SQLite's what it means for a file of an
// export.
func explain(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_TOOBIG {
		return fmt.Errorf("%w: a row longer than %d MiB, which capsem export does not write", err, maxRowBytes>>20)
	}
	return err
}

// schemaObject is a row of sqlite_schema.
type schemaObject struct {
	typ, name, table string
	sql              sql.NullString
}

func (o schemaObject) String() string { return o.typ + " " + o.name }

// maxSchemaDiffs is how many differences an error names.
const maxSchemaDiffs = 5

// schemaDiffs compares the file's sqlite_schema with an export's, row by
// row, and describes each difference, at most maxSchemaDiffs of them. It
// reads at most as many rows as an export has and maxSchemaDiffs more.
func schemaDiffs(ctx context.Context, q Querier) ([]string, error) {
	want, err := exportSchema()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, "SELECT type, name, tbl_name, sql FROM sqlite_schema")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var diffs []string
	seen := map[string]bool{}
	for n := 0; rows.Next() && len(diffs) < maxSchemaDiffs; n++ {
		if n >= len(want)+maxSchemaDiffs {
			diffs = append(diffs, "it has more objects than an export")
			break
		}
		var o schemaObject
		if err := rows.Scan(&o.typ, &o.name, &o.table, &o.sql); err != nil {
			return nil, err
		}
		w, ok := want[o.name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("it has %s %q, which capsem export does not write", o.typ, o.name))
		case seen[o.name]:
			diffs = append(diffs, fmt.Sprintf("it has %q twice", o.name))
		case o.typ != w.typ:
			diffs = append(diffs, fmt.Sprintf("%q is a %s, where capsem export writes a %s", o.name, o.typ, w.typ))
		case o != w:
			diffs = append(diffs, fmt.Sprintf("%s %q is not as capsem export writes it", w.typ, o.name))
		}
		seen[o.name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for name, w := range want {
		if !seen[name] {
			missing = append(missing, fmt.Sprintf("it lacks %s %q", w.typ, name))
		}
	}
	slices.Sort(missing)
	diffs = append(diffs, missing...)
	return diffs[:min(len(diffs), maxSchemaDiffs)], nil
}

var (
	exportSchemaOnce sync.Once
	exportSchemaRows map[string]schemaObject
	exportSchemaErr  error
)

// exportSchema is the sqlite_schema of an export, by name: that of an
// empty export built in memory, once, by the statements build runs, so
// that schema.go stays the one home of the schema.
func exportSchema() (map[string]schemaObject, error) {
	exportSchemaOnce.Do(func() {
		exportSchemaRows, exportSchemaErr = buildExportSchema()
		if exportSchemaErr != nil {
			exportSchemaErr = fmt.Errorf("the schema of an export: %w", exportSchemaErr)
		}
	})
	return exportSchemaRows, exportSchemaErr
}

func buildExportSchema() (map[string]schemaObject, error) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection, one in-memory database
	for _, q := range schemaSQL() {
		if _, err := db.Exec(q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	rows, err := db.Query("SELECT type, name, tbl_name, sql FROM sqlite_schema")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]schemaObject{}
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.typ, &o.name, &o.table, &o.sql); err != nil {
			return nil, err
		}
		out[o.name] = o
	}
	return out, rows.Err()
}

// schemaSQL are the statements that make an export's schema: its tables,
// then its indexes (build creates them once the rows are in).
func schemaSQL() []string {
	var out []string
	for _, t := range schema {
		out = append(out, t.createSQL())
	}
	for _, ix := range indexes() {
		out = append(out, ix.createSQL())
	}
	return out
}
