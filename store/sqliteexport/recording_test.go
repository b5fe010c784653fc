package sqliteexport

import (
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

// TestRecordingEvents: a session that went past its byte budget exports
// its over-budget and unstored events to recording_events, and
// sessions.lost is the count of the events it did not store.
func TestRecordingEvents(t *testing.T) {
	st, err := store.OpenWith(t.TempDir(), store.Options{MaxSessionBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Begin(store.Session{ID: "s1", StartedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		w.Append(store.Event{DNS: &store.DNS{QName: "flood.test", Decision: store.Denied}})
	}
	w.End(nil) // reports the unstored events
	out, res := export(t, st, Options{})
	if res.RecordingEvents != 2 {
		t.Errorf("result %+v, want 2 recording events", res)
	}
	db := openExport(t, out)
	for _, err := range VerifySchema(db, SchemaVersion) {
		t.Error(err)
	}
	rows := queryRows(t, db, "SELECT state, count, detail FROM recording_events ORDER BY id")
	if len(rows) != 2 || rows[0]["state"] != "over-budget" || rows[0]["count"] != int64(0) || rows[1]["state"] != "unstored" {
		t.Fatalf("recording_events %v", rows)
	}
	if d, _ := rows[1]["detail"].(string); !strings.Contains(d, "--max-session-bytes") {
		t.Errorf("unstored detail %q", d)
	}
	s := queryRows(t, db, "SELECT lost, dns FROM sessions")
	if s[0]["lost"] != rows[1]["count"] || s[0]["dns"].(int64)+s[0]["lost"].(int64) != 1000 {
		t.Errorf("sessions %v, unstored %v: want lost = unstored and dns + lost = 1000", s[0], rows[1]["count"])
	}
}
