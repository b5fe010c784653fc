package tests

import (
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
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
