package ui

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsem/capsem/store/sqliteexport"
)

// TestSessionListCut: an exported file of more sessions than the reader
// lists (sqliteexport.MaxSessions) shows its newest and says that the list
// was cut and how many the file holds; the fixture's one session is listed
// without that note, and an unlisted session still opens by its id.
func TestSessionListCut(t *testing.T) {
	b, err := os.ReadFile(fixtureFile)
	if err != nil {
		t.Fatal(err)
	}
	many := filepath.Join(t.TempDir(), "many.db")
	if err := os.WriteFile(many, b, 0o600); err != nil {
		t.Fatal(err)
	}
	const extra = sqliteexport.MaxSessions + 200
	db, err := sql.Open("sqlite", many)
	if err != nil {
		t.Fatal(err)
	}
	var oldest string
	if err := db.QueryRow(`SELECT id FROM sessions ORDER BY started_at LIMIT 1`).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		INSERT INTO sessions (id, started_at, started_at_ms, command)
		SELECT printf('many-%%05d', i), strftime('%%Y-%%m-%%dT%%H:%%M:%%S.000000000Z', 4102444800 + i, 'unixepoch'), (4102444800 + i) * 1000,
			'["true"]' FROM n`, extra)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, tc := range []struct {
		file string
		cut  string // the note, "" for none
		why  string
	}{
		{fixtureFile, "", "the fixture: one session"},
		{many, fmt.Sprintf("Only the newest %d of the %d sessions are listed", sqliteexport.MaxSessions, extra+1), "more than the reader lists"},
	} {
		r, err := sqliteexport.OpenReader(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		srv := testServer(t, r)
		base := srv.URL + "/" + testToken + "/"
		code, _, body := get(t, base, "")
		if code != 200 {
			t.Fatalf("%s: the sessions page: %d", tc.why, code)
		}
		if rows := strings.Count(body, `<tr class="session`); rows > sqliteexport.MaxSessions {
			t.Errorf("%s: %d sessions listed, want at most %d", tc.why, rows, sqliteexport.MaxSessions)
		}
		has := strings.Contains(body, `id="sessions-cut"`)
		if tc.cut == "" && has {
			t.Errorf("%s: the list says it was cut", tc.why)
		}
		if tc.cut != "" && !strings.Contains(body, tc.cut) {
			t.Errorf("%s: the page does not say %q", tc.why, tc.cut)
		}
		if code, _, _ := get(t, base+"s/"+oldest, ""); code != 200 {
			t.Errorf("%s: the session %s: %d", tc.why, oldest, code)
		}
		r.Close()
	}
}
