package sqliteexport

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// storeWith opens a store, closed with the test, holding one ended session
// per element of sessions, "s1", "s2", … started at t0, t0+1ms, …, each
// with its events appended in order.
func storeWith(t *testing.T, sessions ...[]store.Event) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i, events := range sessions {
		w, err := st.Begin(store.Session{ID: "s" + strconv.Itoa(i+1), StartedAt: t0.Add(time.Duration(i) * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			w.Append(ev)
		}
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// openExport opens an exported file for reading; it is closed with the test.
func openExport(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// tableNames lists the tables of db, sorted.
func tableNames(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// queryRows runs q and returns every row as a map from column to value
// ([]byte values turned to strings).
func queryRows(t *testing.T, db *sql.DB, q string, args ...any) []map[string]any {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dump renders every row of every table, in primary-key order, as text
// with typed values, so that two exports can be compared exactly.
func dump(t *testing.T, db *sql.DB) map[string][]string {
	t.Helper()
	return dumpWithout(t, db)
}

// dumpWithout is dump without the columns named in skip.
func dumpWithout(t *testing.T, db *sql.DB, skip ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, tbl := range tableNames(t, db) {
		rows := queryRows(t, db, "SELECT * FROM "+tbl+" ORDER BY id")
		for _, r := range rows {
			keys := make([]string, 0, len(r))
			for k := range r {
				if !slices.Contains(skip, k) {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			var b strings.Builder
			for _, k := range keys {
				fmt.Fprintf(&b, "%s=%T:%v|", k, r[k], r[k])
			}
			out[tbl] = append(out[tbl], b.String())
		}
	}
	return out
}

// pragmaRows returns the rows of a PRAGMA as maps.
func pragmaRows(t *testing.T, db *sql.DB, pragma string) []map[string]any {
	t.Helper()
	return queryRows(t, db, "SELECT * FROM pragma_"+pragma)
}

// openRW opens a copy of an exported file for writing.
func openRW(t *testing.T, path string) *sql.DB {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", cp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
