package sqliteexport

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exportSmall exports a store of two sessions of 8 events each.
func exportSmall(t *testing.T) string {
	t.Helper()
	st := fillStore(t, 2, 8)
	defer st.Close()
	out := filepath.Join(t.TempDir(), "out.db")
	if _, err := Export(context.Background(), st, out, Options{}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSchemaMatchesTheSpecification(t *testing.T) {
	db := openExport(t, exportSmall(t))
	for _, err := range VerifySchema(db, SchemaVersion) {
		t.Error(err)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/schema.sql from the schema the export writes")

// TestSchemaIsThePublishedOne: the CREATE statements in an export's
// sqlite_master (what `sqlite3 out.db .schema` prints) are those of
// testdata/schema.sql, to the byte: a column renamed, moved, retyped or
// re-documented, or an index changed, shows here first. If the change is
// meant, run the test with -update and say in SchemaVersion's comment what
// changed.
func TestSchemaIsThePublishedOne(t *testing.T) {
	db := openExport(t, exportSmall(t))
	var b strings.Builder
	for _, r := range queryRows(t, db, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid") {
		b.WriteString(r["sql"].(string) + ";\n")
	}
	golden := filepath.Join("testdata", "schema.sql")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the export's schema is not %s (run with -update if the change is meant):\n%s", golden, got)
	}
}

func TestSchemaIndexesAreUsed(t *testing.T) {
	db := openExport(t, exportSmall(t))
	// The indexes are used: a lookup by session and time is not a scan.
	plan := queryRows(t, db, "EXPLAIN QUERY PLAN SELECT * FROM net_events WHERE session_id = 'x' AND timestamp > '2026'")
	if detail, _ := plan[0]["detail"].(string); !strings.Contains(strings.ToLower(detail), "using index") {
		t.Errorf("query plan %q does not use an index", detail)
	}
}

func TestSchemaVersionAndApplicationID(t *testing.T) {
	db := openExport(t, exportSmall(t))
	var v, app int64
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion {
		t.Errorf("user_version = %d, want %d", v, SchemaVersion)
	}
	if err := db.QueryRow("PRAGMA application_id").Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != ApplicationID {
		t.Errorf("application_id = %#x, want %#x", app, ApplicationID)
	}
}

func TestIntegrityAndForeignKeyCheck(t *testing.T) {
	db := openExport(t, exportSmall(t))
	var ok string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if ok != "ok" {
		t.Errorf("integrity_check: %s", ok)
	}
	if bad := pragmaRows(t, db, "foreign_key_check"); len(bad) != 0 {
		t.Errorf("foreign_key_check: %v", bad)
	}
}

// TestSchemaCheckSeqUniqueness: the specification wants (session_id, seq)
// unique where one event makes one row, and not unique in the tables of a
// model call's tool calls and tool results; Verify tells either mistake.
func TestSchemaCheckSeqUniqueness(t *testing.T) {
	rw := openRW(t, exportSmall(t))
	for _, q := range []string{
		"DROP INDEX tool_calls_session_seq",
		"CREATE UNIQUE INDEX tool_calls_session_seq ON tool_calls(session_id, seq)",
		"DROP INDEX model_calls_session_seq",
		"CREATE INDEX model_calls_session_seq ON model_calls(session_id, seq)",
	} {
		if _, err := rw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var msgs []string
	for _, err := range VerifySchema(rw, SchemaVersion) {
		msgs = append(msgs, err.Error())
	}
	if len(msgs) != 2 || !strings.Contains(strings.ToLower(msgs[0]+msgs[1]), "tool_calls: no index on (session_id,seq)") ||
		!strings.Contains(strings.ToLower(msgs[0]+msgs[1]), "model_calls: no index on (!session_id,seq)") {
		t.Errorf("Verify = %q, want the two index mistakes", msgs)
	}
}
