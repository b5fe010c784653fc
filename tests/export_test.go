package tests

import (
	"database/sql"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/capsem/capsem/store/sqliteexport"
)

// TestExportOfARealRun exports a capsem-net session produced by real
// clients in the namespace with `capsem export --sqlite`, and reads it back
// with the SQLite driver.
func TestExportOfARealRun(t *testing.T) {
	e, echo := startBasic(t, envOptions{}, "")
	a := e.digA("allowed.test")
	e.digStatus("denied.test")
	e.connect("203.0.113.10", 443)
	e.echoRoundTrip(echo, "echo.test", 8080, 100000)
	e.stop()

	out := filepath.Join(t.TempDir(), "run.db")
	cmd := exec.Command(capsemBin, "export", "--sqlite", out, "--data", e.dataDir, "--all", "--scrub")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "exported 1 session(s)") {
		t.Fatalf("capsem export: %v\n%s", err, b)
	}
	db, err := sql.Open("sqlite", out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Every table, column, primary key, foreign key and index of the
	// specification, on the export of a real run.
	for _, err := range sqliteexport.VerifySchema(db, sqliteexport.SchemaVersion) {
		t.Error(err)
	}
	one := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := one(`SELECT count(*) FROM dns_events WHERE qname = 'allowed.test' AND qtype = 'A' AND decision = 'allowed' AND answer = ? AND resolver_asked = '198.18.0.1'`, a.String()); n < 1 {
		t.Errorf("no exported allowed DNS answer %s for allowed.test", a)
	}
	if n := one(`SELECT count(*) FROM dns_events WHERE qname = 'denied.test' AND decision = 'denied'`); n < 1 {
		t.Error("no exported denied DNS event")
	}
	if n := one(`SELECT count(*) FROM net_events WHERE ip = '203.0.113.10' AND port = 443 AND decision = 'denied' AND reason = 'direct-ip'`); n != 1 {
		t.Errorf("%d direct-ip rows for 203.0.113.10:443, want 1", n)
	}
	if n := one(`SELECT count(*) FROM net_events WHERE domain = 'echo.test' AND decision = 'allowed' AND bytes_sent = 100000 AND bytes_received = 100000 AND conn_type = 'tcp'`); n != 1 {
		t.Errorf("%d allowed echo.test flows with 100000 bytes each way, want 1", n)
	}
	if n := one(`SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL AND denied >= 2 AND allowed >= 2`); n != 1 {
		t.Error("the session row lacks its end time or counts")
	}
	if n := one(`SELECT count(*) FROM net_events n JOIN sessions s ON n.session_id = s.id`); n != one(`SELECT count(*) FROM net_events`) {
		t.Error("net_events rows without their session")
	}
	sessions, err := exec.Command(capsemBin, "sessions", "--data", e.dataDir, "--json").Output()
	var list []struct {
		ID      string `json:"id"`
		Allowed int64  `json:"allowed"`
		Denied  int64  `json:"denied"`
	}
	if err != nil || json.Unmarshal(sessions, &list) != nil || len(list) != 1 || list[0].Denied < 2 || list[0].Allowed < 2 {
		t.Errorf("capsem sessions --json: %v: %s", err, sessions)
	}
	inspect, err := exec.Command(capsemBin, "inspect", "--data", e.dataDir, "--json").Output()
	var rep struct {
		Rows   map[string]int64 `json:"rows"`
		Denied []string         `json:"denied"`
		Checks []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		} `json:"checks"`
	}
	if err != nil || json.Unmarshal(inspect, &rep) != nil {
		t.Fatalf("capsem inspect --json: %v: %s", err, inspect)
	}
	if rep.Rows["dns_events"] < 2 || len(rep.Checks) < 4 || !strings.Contains(strings.Join(rep.Denied, "\n"), "reason=direct-ip") {
		t.Errorf("capsem inspect: %s", inspect)
	}
	for _, ch := range rep.Checks {
		if !ch.OK {
			t.Errorf("inspect check failed on a real run: %s", ch.Name)
		}
	}

	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q %v", check, err)
	}
	rows, err := db.Query(`PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Error("foreign_key_check reports violations")
	}
	rows.Close()
}
