package tests

import (
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/capsem/capsem/store"
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
	inspect, err := exec.Command(capsemBin, "inspect", "--data", e.dataDir, "--ca-dir", filepath.Dir(e.caCert), "--json").Output()
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

	checkTamperedExport(t, e.dataDir, filepath.Dir(e.caCert))
}

// checkTamperedExport exports the session in data unscrubbed and checks
// that capsem inspect verifies its hash chain and seal (the key of the CA
// directory caDir), then that one byte changed with sqlite3, or the
// record re-sealed with a key that is not the installation's, fails it,
// naming the row.
func checkTamperedExport(t *testing.T, data, caDir string) {
	t.Helper()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("needs the sqlite3 command (Debian sqlite3; go tool task deps installs it)")
	}
	fresh := func() string {
		out := filepath.Join(t.TempDir(), "plain.db")
		if b, err := exec.Command(capsemBin, "export", "--sqlite", out, "--data", data, "--all").CombinedOutput(); err != nil {
			t.Fatalf("capsem export: %v\n%s", err, b)
		}
		return out
	}
	inspect := func(file string) (int, string) {
		cmd := exec.Command(capsemBin, "inspect", "--sqlite", file, "--ca-dir", caDir)
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(b)
	}
	genuine := fresh()
	if code, out := inspect(genuine); code != 0 || !regexp.MustCompile(`ok   hash chain \d+ events chained and sealed by key [0-9a-f]{16}`).MatchString(out) {
		t.Fatalf("inspect of a genuine export: exit %d\n%s", code, out)
	}

	// One byte of one row.
	file := fresh()
	var id int
	b, err := exec.Command("sqlite3", file, "SELECT id FROM dns_events WHERE qname = 'denied.test' LIMIT 1").Output()
	if _, serr := fmt.Sscan(string(b), &id); err != nil || serr != nil {
		t.Fatalf("sqlite3: %v %v: %q", err, serr, b)
	}
	if b, err := exec.Command("sqlite3", file, fmt.Sprintf("UPDATE dns_events SET qname = 'e' || substr(qname, 2) WHERE id = %d", id)).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 UPDATE: %v\n%s", err, b)
	}
	want := fmt.Sprintf(": hash chain broken at dns_events row %d (seq ", id)
	if code, out := inspect(file); code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "qname differs from its record") {
		t.Errorf("inspect after a one-byte UPDATE: exit %d, want 1 naming dns_events row %d:\n%s", code, id, out)
	}

	// Re-sealed with another key, after the exit code was changed.
	file = fresh()
	r, err := sqliteexport.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	list, err := r.Sessions()
	r.Close()
	if err != nil || len(list) != 1 {
		t.Fatalf("sessions of the export: %v %v", list, err)
	}
	sess := list[0]
	sess.ExitCode = new(0)
	other := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	sig := ed25519.Sign(other, store.SealMessage(&sess))
	q := fmt.Sprintf("UPDATE sessions SET exit_code = 0, chain_key = '%x', chain_sig = '%x'", []byte(other.Public().(ed25519.PublicKey)), sig)
	if b, err := exec.Command("sqlite3", file, q).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 UPDATE: %v\n%s", err, b)
	}
	if code, out := inspect(file); code != 1 || !strings.Contains(out, "which is not trusted") {
		t.Errorf("inspect of a record re-sealed with another key: exit %d, want 1 saying the key is not trusted:\n%s", code, out)
	}
	// And without re-sealing, the old seal no longer verifies.
	file = fresh()
	if b, err := exec.Command("sqlite3", file, "UPDATE sessions SET exit_code = 7").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 UPDATE: %v\n%s", err, b)
	}
	if code, out := inspect(file); code != 1 || !strings.Contains(out, "signature does not verify") {
		t.Errorf("inspect after the exit code was changed: exit %d:\n%s", code, out)
	}
}
