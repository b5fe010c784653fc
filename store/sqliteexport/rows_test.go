package sqliteexport

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// EventRows names tables and columns as the export does, one row per
// event and a model call's tool calls beside it.
func TestEventRows(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 5, time.UTC)
	for _, c := range []struct {
		ev     store.Event
		tables []string
		col    string
		want   any
		why    string
	}{
		{store.Event{Session: "s1", Seq: 7, Time: at, DNS: &store.DNS{QName: "example.com", QType: "A", Decision: store.Denied}},
			[]string{"dns_events"}, "qname", "example.com", "a DNS event is one dns_events row, its columns named as in the file"},
		{store.Event{Session: "s1", Seq: 8, Time: at, Exec: &store.Exec{Argv: []string{"sh", "-c", "echo hi"}, ExitCode: 3}},
			[]string{"exec_events"}, "command", "sh -c 'echo hi'", "an exec's command is shell-quoted as in the file"},
		{store.Event{Session: "s1", Seq: 9, Time: at, ModelCall: &store.ModelCall{Model: "m", ToolCalls: []store.ToolCall{{CallID: "c1", Name: "ls"}}}},
			[]string{"model_calls", "tool_calls"}, "model", "m", "a model call brings its tool calls along"},
	} {
		rows := EventRows(c.ev)
		var tables []string
		for _, r := range rows {
			tables = append(tables, r.Table)
			if r.Columns["seq"] != int64(c.ev.Seq) || r.Columns["session_id"] != "s1" {
				t.Errorf("%s: seq/session_id = %v/%v (%s)", r.Table, r.Columns["seq"], r.Columns["session_id"], c.why)
			}
			if _, ok := r.Columns["id"]; ok {
				t.Errorf("%s: has id, which only means something inside one file", r.Table)
			}
			if _, err := json.Marshal(r.Columns); err != nil {
				t.Errorf("%s: not JSON: %v", r.Table, err)
			}
		}
		if len(tables) != len(c.tables) || tables[0] != c.tables[0] || tables[len(tables)-1] != c.tables[len(c.tables)-1] {
			t.Errorf("tables %v, want %v (%s)", tables, c.tables, c.why)
			continue
		}
		if got := rows[0].Columns[c.col]; got != c.want {
			t.Errorf("%s.%s = %#v, want %#v (%s)", c.tables[0], c.col, got, c.want, c.why)
		}
	}
}
