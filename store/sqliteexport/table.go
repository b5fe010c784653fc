package sqliteexport

import (
	"strings"

	"github.com/capsem/capsem/store"
)

// A table of the export, as schema.go defines it: each column's name, its
// SQL type and constraints, its comment in the DDL, and the function that
// gives its value in a row. The CREATE TABLE text, the INSERT statement,
// the indexes and the schema check ([VerifySchema]) are all made from
// these definitions, so that a column is named once and its value is
// bound to it by name, not by its position in a list kept elsewhere.

// column is one column of an exported table.
type column struct {
	name string
	decl string // SQL type and constraints, as the DDL has them: "INTEGER NOT NULL DEFAULT 0"
	ref  string // the column it references, as table(column); "" for none
	doc  string // its comment in the DDL; "" for none
	tab  int    // where the comment starts when not at the table's tabs; 0: at them
	// value gives the column's value in the row made from s. Nil leaves
	// the column out of the INSERT: its DEFAULT holds, or an UPDATE after
	// the rows (sessionCounts) fills it.
	value func(c *converter, s *source) any
}

// seqIndex says how a table's (session_id, seq) is indexed.
type seqIndex int

const (
	uniqueSeq seqIndex = iota // one row per stored event: (session_id, seq) is UNIQUE
	sharedSeq                 // rows come several to a stored event and share its seq
	noSeq                     // not an event table (sessions)
)

// table is one table of the export.
type table struct {
	name    string
	seq     seqIndex // zero: one row per stored event
	indexes []string // columns indexed each on its own, besides (session_id, seq) and (session_id, timestamp)
	// tabs are where the DDL's column comments start, counted from the
	// first character of the type: at the first stop that leaves a space
	// after the type, or one space after it when it reaches past them all.
	// They keep the DDL's text as first published (readers see it in
	// sqlite_master and `.schema`). Nil: 9.
	tabs    []int
	columns []column

	pos int // its place in schema, set by init
}

// source is what a row is made from: a session (sessions), or a stored
// event and the row's id (the event tables), with, for a row of a model
// call's tool call or tool result, which one and its model call's row.
type source struct {
	id         int64          // the row's id
	session    string         // the session's id in the export
	sess       *store.Session // sessions: the session
	ev         *store.Event   // event tables: the event
	raw        []byte         // event tables: the event's stored value (nil: not from a store)
	prev       *[32]byte      // its prev in the hash chain; nil when it has none
	sum        [32]byte       // the SHA-256 of raw
	modelCall  int64          // tool_calls, tool_responses: the id of their model call's row
	toolCall   *store.ToolCall
	toolResult *store.ToolResult
}

// args returns the values of the inserted columns of the row made from s,
// in the order of the columns of [table.insertSQL].
func (t *table) args(c *converter, s *source) []any {
	out := make([]any, 0, len(t.columns))
	for i := range t.columns {
		if v := t.columns[i].value; v != nil {
			out = append(out, v(c, s))
		}
	}
	return out
}

// insertSQL is the INSERT of a row: the columns with a value, in table order.
func (t *table) insertSQL() string {
	var cols []string
	for _, col := range t.columns {
		if col.value != nil {
			cols = append(cols, col.name)
		}
	}
	return "INSERT INTO " + t.name + " (" + strings.Join(cols, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
}

// createSQL is the CREATE TABLE statement: a column a line, names padded
// to one width, comments at t.tabs.
func (t *table) createSQL() string {
	width := 0
	for _, col := range t.columns {
		width = max(width, len(col.name))
	}
	tabs := t.tabs
	if tabs == nil {
		tabs = []int{9}
	}
	var b strings.Builder
	b.WriteString("CREATE TABLE " + t.name + " (\n")
	for i, col := range t.columns {
		decl := col.decl
		if col.ref != "" {
			decl += " REFERENCES " + col.ref
		}
		if i < len(t.columns)-1 {
			decl += ","
		}
		b.WriteString("\t" + col.name + strings.Repeat(" ", width+1-len(col.name)) + decl)
		if col.doc != "" {
			at := len(decl) + 1
			for _, tab := range tabs {
				if tab >= at {
					at = tab
					break
				}
			}
			if col.tab != 0 {
				at = col.tab
			}
			b.WriteString(strings.Repeat(" ", at-len(decl)) + "-- " + col.doc)
		}
		b.WriteByte('\n')
	}
	b.WriteString(")")
	return b.String()
}

// index is one index of the export.
type index struct {
	name    string
	table   string
	columns string // "a, b"
	unique  bool
}

func (ix index) createSQL() string {
	unique := ""
	if ix.unique {
		unique = "UNIQUE "
	}
	return "CREATE " + unique + "INDEX " + ix.name + " ON " + ix.table + "(" + ix.columns + ")"
}

// seqIndexes are the (session_id, seq) and (session_id, timestamp)
// indexes of an event table.
func (t *table) seqIndexes() []index {
	if t.seq == noSeq {
		return nil
	}
	return []index{
		{name: t.name + "_session_seq", table: t.name, columns: "session_id, seq", unique: t.seq == uniqueSeq},
		{name: t.name + "_session_time", table: t.name, columns: "session_id, timestamp"},
	}
}

// columnIndexes are the indexes on t.indexes.
func (t *table) columnIndexes() []index {
	var out []index
	for _, col := range t.indexes {
		out = append(out, index{name: t.name + "_" + col, table: t.name, columns: col})
	}
	return out
}

// indexes are every index of the export, in the order they are created
// (after the rows are in: building an index once is faster than
// maintaining it row by row). The order is the one the first exports
// used, so that the same store still gives the same file: the seq and
// time indexes of the tables with one row per event, then those of the
// tables with shared seqs, then the indexes on single columns.
func indexes() []index {
	var out []index
	for _, seq := range []seqIndex{uniqueSeq, sharedSeq} {
		for _, t := range schema {
			if t.seq == seq {
				out = append(out, t.seqIndexes()...)
			}
		}
	}
	for _, t := range schema {
		out = append(out, t.columnIndexes()...)
	}
	return out
}
