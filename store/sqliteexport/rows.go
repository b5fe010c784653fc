package sqliteexport

import "github.com/capsem/capsem/store"

// Row is one row the export makes of an event, by column name, for
// readers that take events one at a time rather than as a file (a
// sandbox's event stream, GET /v1/events): the same tables, column names
// and values as the SQLite file, without the columns that only mean
// something inside one (id, model_call_id).
type Row struct {
	Table   string
	Columns map[string]any
}

// EventRows returns the rows the export makes of ev: one, or for a model
// call its model_calls row followed by its tool_calls and tool_responses
// rows. ev.Session is taken as the session's id.
func EventRows(ev store.Event) []Row {
	var out []Row
	conv := &converter{}
	row := func(t *table, s *source) error {
		s.id = 1
		cols := make(map[string]any, len(t.columns))
		for i := range t.columns {
			c := &t.columns[i]
			if c.value == nil || c.name == "id" || c.name == "model_call_id" {
				continue
			}
			cols[c.name] = c.value(conv, s)
		}
		out = append(out, Row{Table: t.name, Columns: cols})
		return nil
	}
	_ = eventRows(&source{session: ev.Session, ev: &ev}, row, nil, &Result{})
	return out
}
