package sqliteexport

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// VerifySchema checks that db has the schema of an export as this build
// writes it — every table of schema.go, every column in order, the
// primary keys, the foreign keys, the indexes — and the given schema
// version, and returns every difference it finds (none: the schema is
// right). `capsem inspect` and the end-to-end tests check exports with it,
// which tells a file this build would not write (made by another version,
// or changed after the export) from one it would. It reads db and never
// writes to it.
func VerifySchema(db Querier, version int64) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	var v int64
	if err := db.QueryRowContext(context.Background(), "PRAGMA user_version").Scan(&v); err != nil {
		return []error{err}
	}
	if v != version {
		fail("user_version = %d, want %d", v, version)
	}
	have, err := queryStrings(db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return append(errs, err)
	}
	var want []string
	for _, t := range schema {
		want = append(want, t.name)
	}
	slices.Sort(want)
	if !slices.Equal(have, want) {
		fail("tables = %v, want %v", have, want)
	}
	for _, t := range schema {
		if !slices.Contains(have, t.name) {
			continue
		}
		spec := t.spec()
		cols, err := queryStrings(db, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, t.name)
		if err != nil {
			return append(errs, err)
		}
		if !slices.Equal(cols, spec.columns) {
			fail("%s columns = %v, want %v", t.name, cols, spec.columns)
		}
		pks, err := queryStrings(db, `SELECT name FROM pragma_table_info(?) WHERE pk > 0`, t.name)
		if err != nil {
			return append(errs, err)
		}
		if !slices.Equal(pks, spec.primaryKey) {
			fail("%s primary key = %v, want %v", t.name, pks, spec.primaryKey)
		}
		fks, err := queryStrings(db, `SELECT "from" || '→' || "table" || '.' || "to" FROM pragma_foreign_key_list(?) ORDER BY "from"`, t.name)
		if err != nil {
			return append(errs, err)
		}
		if !slices.Equal(fks, spec.foreignKeys) {
			fail("%s foreign keys = %v, want %v", t.name, fks, spec.foreignKeys)
		}
		ixs, err := indexesOf(db, t.name)
		if err != nil {
			return append(errs, err)
		}
		for _, ix := range spec.indexes {
			if !slices.Contains(ixs, ix) {
				fail("%s: no index on (%s); have %v", t.name, ix, ixs)
			}
		}
	}
	return errs
}

// tableSpec is what VerifySchema checks of a table, in the form SQLite's
// pragmas give it.
type tableSpec struct {
	columns     []string // in order
	primaryKey  []string
	foreignKeys []string // "column→table.column", sorted
	indexes     []string // "a,b", "!" first when UNIQUE
}

func (t *table) spec() tableSpec {
	var s tableSpec
	for _, col := range t.columns {
		s.columns = append(s.columns, col.name)
		if strings.Contains(col.decl, "PRIMARY KEY") {
			s.primaryKey = append(s.primaryKey, col.name)
			if col.decl != "INTEGER PRIMARY KEY" {
				// Not the rowid: SQLite keeps it unique with an index
				// of its own.
				s.indexes = append(s.indexes, "!"+col.name)
			}
		}
		if col.ref != "" {
			ref := strings.TrimSuffix(strings.Replace(col.ref, "(", ".", 1), ")")
			s.foreignKeys = append(s.foreignKeys, col.name+"→"+ref)
		}
	}
	slices.Sort(s.foreignKeys)
	for _, ix := range append(t.columnIndexes(), t.seqIndexes()...) {
		key := strings.ReplaceAll(ix.columns, ", ", ",")
		if ix.unique {
			key = "!" + key
		}
		s.indexes = append(s.indexes, key)
	}
	return s
}

func queryStrings(db Querier, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// indexesOf lists a table's indexes as "col1,col2", "!" first when UNIQUE.
func indexesOf(db Querier, table string) ([]string, error) {
	rows, err := db.QueryContext(context.Background(), `SELECT name, "unique" FROM pragma_index_list(?)`, table)
	if err != nil {
		return nil, err
	}
	type ix struct {
		name   string
		unique bool
	}
	var list []ix
	for rows.Next() {
		var i ix
		if err := rows.Scan(&i.name, &i.unique); err != nil {
			rows.Close()
			return nil, err
		}
		list = append(list, i)
	}
	rows.Close()
	var out []string
	for _, i := range list {
		cols, err := queryStrings(db, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, i.name)
		if err != nil {
			return nil, err
		}
		key := strings.Join(cols, ",")
		if i.unique {
			key = "!" + key
		}
		out = append(out, key)
	}
	return out, nil
}
