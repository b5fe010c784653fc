package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store/sqliteexport"
)

// exportOf exports the store in dir, every session, to a new file and
// returns its path.
func exportOf(t *testing.T, dir string, scrub bool) string {
	t.Helper()
	st, err := openTestStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	path := filepath.Join(t.TempDir(), "export.db")
	if _, err := sqliteexport.Export(context.Background(), st, path, sqliteexport.Options{Scrub: scrub}); err != nil {
		t.Fatal(err)
	}
	return path
}

// edited copies the file at path, runs edits on the copy and returns it.
func edited(t *testing.T, path string, edits ...string) string {
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
	db.SetMaxOpenConns(1)
	for _, e := range edits {
		if _, err := db.Exec(e); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
	}
	return cp
}

// inspectWithin runs capsem inspect with args and fails the test when it
// does not return within d: a hostile file must be refused, not read
// forever. It returns the exit code and the output.
func inspectWithin(t *testing.T, d time.Duration, args ...string) (int, string) {
	t.Helper()
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		code := run(append([]string{"capsem", "inspect"}, args...), &out, &out)
		done <- result{code, out.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.out
	case <-time.After(d):
		t.Fatalf("capsem inspect %s still running after %v", strings.Join(args, " "), d)
		return 0, ""
	}
}

// TestInspectSQLiteHostile: inspect --sqlite opens a file as capsem ui
// --sqlite does, through the reader's checks: a recursive view in place of
// the sessions table, a trigger or a generated column is refused within a
// second, naming the object, instead of read (a view without end spins
// forever).
func TestInspectSQLiteHostile(t *testing.T) {
	genuine := exportOf(t, modelCallSession(t, ""), false)
	for _, tc := range []struct {
		edits []string
		name  string
		why   string
	}{
		{[]string{"PRAGMA legacy_alter_table = ON", "ALTER TABLE sessions RENAME TO sessions_old",
			`CREATE VIEW sessions AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT s.* FROM sessions_old s, r`},
			"sessions", "a recursive view in place of sessions"},
		{[]string{`CREATE TRIGGER t_note AFTER INSERT ON sessions BEGIN SELECT 1; END`}, "t_note", "a trigger"},
		{[]string{`ALTER TABLE sessions ADD COLUMN note TEXT GENERATED ALWAYS AS (printf('%.*c', 50000000, 'x')) VIRTUAL`},
			"sessions", "a generated column of 50 MB a row"},
	} {
		file := edited(t, genuine, tc.edits...)
		code, out := inspectWithin(t, time.Second, "--sqlite", file)
		if code == 0 {
			t.Errorf("%s: exit 0:\n%s", tc.why, out)
			continue
		}
		for _, w := range []string{"not a capsem export (or one from another version)", tc.name} {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output does not say %q:\n%s", tc.why, w, out)
			}
		}
	}
}

// TestInspectSQLiteGenuine: what capsem export writes passes inspect
// --sqlite, plain and scrubbed (--scrub), and so does the committed
// fixture of a real session.
func TestInspectSQLiteGenuine(t *testing.T) {
	dir := modelCallSession(t, "")
	fixtures := filepath.Join("..", "..", "tests", "fixtures")
	for _, tc := range []struct {
		path, why string
		args      []string
	}{
		{exportOf(t, dir, false), "a plain export", nil},
		{exportOf(t, dir, true), "a scrubbed export", nil},
		// Sealed by the key of the machine that recorded it, which is not
		// this one's: trusted with --key.
		{filepath.Join(fixtures, "session.db"), "tests/fixtures/session.db", []string{"--key", filepath.Join(fixtures, "session-seal.pub")}},
	} {
		if code, out := inspectWithin(t, 30*time.Second, append([]string{"--sqlite", tc.path}, tc.args...)...); code != 0 || strings.Contains(out, "FAIL") {
			t.Errorf("%s: exit %d:\n%s", tc.why, code, out)
		}
	}
}
