package sqliteexport

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// A file someone sent is read as an attacker would write it: the tests
// here edit a genuine export into what the reader must refuse or read
// within bounds.

// genuineExport exports one session of every kind of event and returns
// the file's path.
func genuineExport(t testing.TB, opt Options) string {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Begin(fullSession("s1", t0))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range fullEvents() {
		w.Append(ev)
	}
	code := 0
	if err := w.End(&code); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "export.db")
	if _, err := Export(context.Background(), st, path, opt); err != nil {
		t.Fatal(err)
	}
	return path
}

// editedCopy copies the file at path and runs each of edits on the copy,
// opened for writing, and returns the copy's path.
func editedCopy(t testing.TB, path string, edits ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "edited.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", cp)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the PRAGMAs hold for the edits after them
	for _, e := range edits {
		if _, err := db.Exec(e); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
	}
	return cp
}

// hugeCommand is the sessions table with its command column computed on
// every read: a 50 MB JSON array from a file of a few KiB.
func hugeCommand() []string {
	var cols []string
	for _, c := range sessionsTable.columns {
		if c.name != "command" {
			cols = append(cols, c.name)
		}
	}
	create := sessionsTable.createSQL()
	i := strings.Index(create, "\tcommand ")
	j := i + strings.Index(create[i:], "TEXT,")
	create = create[:j] + `TEXT GENERATED ALWAYS AS ('["' || printf('%.*c', 50000000, 'x') || '"]') VIRTUAL,` + create[j+len("TEXT,"):]
	list := strings.Join(cols, ", ")
	return []string{
		"PRAGMA legacy_alter_table = ON", // the other tables' REFERENCES sessions stay as they are
		"ALTER TABLE sessions RENAME TO sessions_old",
		create,
		"INSERT INTO sessions (" + list + ") SELECT " + list + " FROM sessions_old",
		"DROP TABLE sessions_old",
		"CREATE INDEX sessions_started_at ON sessions(started_at)",
	}
}

// retype sets the declared type of column of table to typ in the schema,
// with writable_schema: the rows stay as they are.
func retype(table, column, from, to string) []string {
	var sqlText string
	for _, t := range schema {
		if t.name == table {
			sqlText = t.createSQL()
		}
	}
	i := strings.Index(sqlText, "\t"+column+" ")
	j := i + strings.Index(sqlText[i:], from)
	sqlText = sqlText[:j] + to + sqlText[j+len(from):]
	return []string{
		"PRAGMA writable_schema = ON",
		"UPDATE sqlite_schema SET sql = '" + strings.ReplaceAll(sqlText, "'", "''") + "' WHERE name = '" + table + "'",
		"PRAGMA writable_schema = OFF",
	}
}

// TestReaderRefusesAnotherSchema: the reader reads only the schema the
// exporter writes. Any object added, changed or missing — one that could
// compute rows without end or huge ones, or that the exporter does not
// write — is refused when the file is opened, with an error naming it.
func TestReaderRefusesAnotherSchema(t *testing.T) {
	path := genuineExport(t, Options{})
	for _, tc := range []struct {
		edits []string
		name  string // the object the error names
		why   string
	}{
		{[]string{`CREATE VIEW loop AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r`},
			"loop", "a recursive view: rows without end"},
		{[]string{`ALTER TABLE net_events RENAME TO net_events_old`,
			`CREATE VIEW net_events AS SELECT * FROM net_events_old`}, "net_events", "a view in place of a table"},
		{[]string{`CREATE TRIGGER t_notes AFTER INSERT ON sessions BEGIN SELECT 1; END`}, "t_notes", "a trigger"},
		{hugeCommand(), "sessions", "a generated column: 50 MB per row from a small file"},
		{retype("other_events", "kind", "TEXT NOT NULL", "BLOB NOT NULL"), "other_events", "a column's type altered"},
		{[]string{`CREATE INDEX net_events_method ON net_events(method)`}, "net_events_method", "an index the exporter does not make"},
		{[]string{`DROP INDEX net_events_domain`, `CREATE INDEX net_events_domain ON net_events(domain, path)`},
			"net_events_domain", "an index of ours on other columns"},
		{[]string{`DROP INDEX dns_events_qname`}, "dns_events_qname", "an index missing"},
		{[]string{`CREATE TABLE notes (x)`}, "notes", "a table the exporter does not make"},
		{[]string{`ANALYZE`}, "sqlite_stat1", "statistics that steer the query planner"},
	} {
		file := editedCopy(t, path, tc.edits...)
		start := time.Now()
		r, err := OpenReader(file)
		if err == nil {
			r.Close()
			t.Errorf("%s: OpenReader succeeded", tc.why)
			continue
		}
		for _, w := range []string{"sqliteexport: ", "not a capsem export (or one from another version)", tc.name} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.why, err, w)
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: refused after %v, want under a second", tc.why, d)
		}
	}
}

// TestReaderOpensGenuineExports: what the exporter writes opens and reads,
// plain or scrubbed, and so does the committed fixture of a real session.
func TestReaderOpensGenuineExports(t *testing.T) {
	for _, tc := range []struct {
		path, why string
	}{
		{genuineExport(t, Options{}), "a plain export"},
		{genuineExport(t, Options{Scrub: true}), "a scrubbed export (--scrub)"},
		{filepath.Join("..", "..", "tests", "fixtures", "session.db"), "tests/fixtures/session.db, a real session"},
	} {
		r, err := OpenReader(tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.why, err)
			continue
		}
		sessions, err := r.Sessions()
		if err != nil || len(sessions) == 0 {
			t.Errorf("%s: Sessions: %d, %v", tc.why, len(sessions), err)
		}
		for _, s := range sessions {
			n := 0
			if err := r.Events(s.ID, func(store.Event) error { n++; return nil }); err != nil || int64(n) != s.Counts.Events {
				t.Errorf("%s: %s: %d events read (%v), the file says %d", tc.why, s.ID, n, err, s.Counts.Events)
			}
		}
		r.Close()
	}
}

// manySessions is a genuine export with n sessions more, inserted by SQL:
// "many-00001" … started a second apart after the export's own.
func manySessions(t testing.TB, n int) string {
	t.Helper()
	at := t0.Add(time.Hour).Unix()
	return editedCopy(t, genuineExport(t, Options{}), fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		INSERT INTO sessions (id, started_at, started_at_ms, ended_at, ended_at_ms, command, exit_code)
		SELECT printf('many-%%05d', i), strftime('%%Y-%%m-%%dT%%H:%%M:%%S.000000000Z', %d + i, 'unixepoch'), (%d + i) * 1000,
			strftime('%%Y-%%m-%%dT%%H:%%M:%%S.000000000Z', %d + i + 1, 'unixepoch'), (%d + i + 1) * 1000, '["true"]', 0 FROM n`,
		n, at, at, at, at))
}

// TestReaderSessionsBounded: Sessions lists at most MaxSessions, the
// newest, however many the file holds, and SessionCount says how many it
// holds, so that a list can say it was cut.
func TestReaderSessionsBounded(t *testing.T) {
	const extra = 1500
	r, err := OpenReader(manySessions(t, extra))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sessions, err := r.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != MaxSessions {
		t.Fatalf("Sessions returned %d of %d sessions, want the newest %d", len(sessions), extra+1, MaxSessions)
	}
	if want := fmt.Sprintf("many-%05d", extra); sessions[0].ID != want {
		t.Errorf("the first listed is %s, want the newest, %s", sessions[0].ID, want)
	}
	if n, err := r.SessionCount(); err != nil || n != extra+1 {
		t.Errorf("SessionCount = %d, %v; want %d", n, err, extra+1)
	}
	// The oldest, not listed, is still there by id.
	if _, err := r.Session("s1"); err != nil {
		t.Errorf("Session of an unlisted session: %v", err)
	}
}

// TestReaderRowLimit: a row longer than maxRowBytes — more than the
// exporter writes in one — is an error when read, not a value held whole.
func TestReaderRowLimit(t *testing.T) {
	file := editedCopy(t, genuineExport(t, Options{}),
		fmt.Sprintf(`UPDATE net_events SET response_body_preview = printf('%%.*c', %d, 'x') WHERE id = 1`, maxRowBytes+1))
	r, err := OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	longest := 0
	err = r.Events("s1", func(ev store.Event) error {
		if ev.Net != nil {
			longest = max(longest, len(ev.Net.ResponseBodyPreview))
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "too big") {
		t.Errorf("Events: %v, want an error saying the row is too big (longest preview read: %d bytes)", err, longest)
	}
}

// TestReaderRefusesAPageTwice: a b-tree whose interior page points at one
// child again and again (a scan reads the same rows over and over; with a
// few levels of it, for longer than anyone waits) is refused when the
// file is opened.
func TestReaderRefusesAPageTwice(t *testing.T) {
	file := manySessions(t, 2000)
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int64
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'sessions'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	page := b[(root-1)*pageSize : root*pageSize]
	hdr := page
	if root == 1 {
		hdr = page[100:]
	}
	if hdr[0] != 0x05 {
		t.Fatalf("the sessions root page is of type %#x, want an interior table page (0x05)", hdr[0])
	}
	cells := int(binary.BigEndian.Uint16(hdr[3:5]))
	first := binary.BigEndian.Uint32(page[binary.BigEndian.Uint16(hdr[12:14]):])
	for i := range cells {
		off := binary.BigEndian.Uint16(hdr[12+2*i:])
		binary.BigEndian.PutUint32(page[off:], first)
	}
	binary.BigEndian.PutUint32(hdr[8:12], first)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(file)
	if err == nil {
		ss, _ := r.Sessions()
		r.Close()
		t.Fatalf("OpenReader succeeded (Sessions then listed %d sessions)", len(ss))
	}
	for _, w := range []string{"sqliteexport: ", "damaged"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
