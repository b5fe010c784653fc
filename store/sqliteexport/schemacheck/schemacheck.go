// Package schemacheck verifies that a SQLite file has the schema of a
// capsem export: every table, every column in order, the primary keys, the
// foreign keys, the indexes and the schema version, as the tables of
// package sqliteexport define them — the definitions its CREATE TABLE
// statements and inserts are made from, so that the check cannot drift
// from what the exporter writes. `capsem inspect` and the end-to-end tests
// check exports with it, which tells a file this build would not write
// (made by another version, or changed after the export) from one it
// would. It reads the database and never writes to it.
//
// Deprecated: call [sqliteexport.VerifySchema], which Verify only
// forwards to. The package goes once its last caller, cmd/capsem's
// inspect.go, calls VerifySchema.
package schemacheck

import (
	"github.com/capsem/capsem/store/sqliteexport"
)

// Verify checks db against the export's schema and the given schema
// version and returns every difference it finds (none: the schema is
// right). See [sqliteexport.VerifySchema].
func Verify(db sqliteexport.Querier, version int64) []error {
	return sqliteexport.VerifySchema(db, version)
}
