// Command capsem is the user-facing CLI. Today: `capsem export --sqlite`,
// which writes sessions of the event store to a SQLite file (see package
// store/sqliteexport). `capsem run`, `capsem sessions`, `capsem inspect` and
// `capsem doctor` arrive with their issues.
package main
