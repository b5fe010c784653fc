package sqliteexport

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)

// mappingStore holds one session with a fully populated DNS event, a fully
// populated Net event, a rate-limited drop and a bare net event.
func mappingStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := st.Begin(store.Session{ID: "s1", StartedAt: t0, Command: []string{"claude", "-p", "say \"hi\" <now>"},
		PolicySHA256: "ab12", Image: "debian-12", Host: "box", Sandbox: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Time: t0.Add(time.Millisecond), DNS: &store.DNS{
		QName: "api.example.com", QType: "A", Transport: store.TransportTCP, Decision: store.Allowed,
		Reason: "allowed by rule", MatchedRule: "*.example.com", Answer: "198.19.0.5",
		ResolverAsked: netip.MustParseAddr("8.8.8.8")}})
	w.Append(store.Event{Time: t0.Add(2 * time.Millisecond), Net: &store.Net{
		Domain: "api.example.com", IP: netip.MustParseAddr("198.19.0.5"), Port: 8443,
		SrcIP: netip.MustParseAddr("198.18.0.2"), SrcPort: 50123, Transport: store.TransportTCP,
		ConnType: store.ConnHTTPS, Decision: store.Allowed, Reason: "rule", MatchedRule: "*.example.com:8443",
		HTTPVersion: store.HTTP2, Method: "POST", Path: "/v1/items", Query: "a=1&b=2", StatusCode: 201, BytesSent: 1234, BytesReceived: 56789,
		Duration:            1500 * time.Microsecond,
		RequestHeaders:      []store.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Dup", Value: "1"}, {Name: "X-Dup", Value: "2 <&>"}},
		ResponseHeaders:     []store.Header{{Name: "Server", Value: "test"}},
		RequestBodyPreview:  `{"q":"é"}`,
		ResponseBodyPreview: "ok\xff\x00end",
		Count:               1, Detail: "a detail"}})
	w.Append(store.Event{Time: t0.Add(3 * time.Millisecond), Net: &store.Net{
		IP: netip.MustParseAddr("2001:db8::1"), Transport: store.TransportIPv6, Decision: store.Denied,
		Reason: "ipv6 is not routed", Count: 7}})
	w.Append(store.Event{Time: t0.Add(4 * time.Millisecond), Net: &store.Net{Decision: store.Denied}})
	w.Append(store.Event{Time: t0.Add(5 * time.Millisecond), DNS: &store.DNS{QName: "evil.test", QType: "TXT",
		Transport: store.TransportUDP, Decision: store.Denied, Answer: "NXDOMAIN"}})
	code := 3
	if err := w.End(&code); err != nil {
		t.Fatal(err)
	}
	return st
}

func export(t *testing.T, st *store.Store, opt Options) (string, Result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export.db")
	res, err := Export(context.Background(), st, out, opt)
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

func checkRow(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: no column %s", what, k)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("%s.%s = %#v, want %#v", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && !isChainColumn(k) { // those: verifychain_test.go
			t.Errorf("%s: column %s not checked by the test", what, k)
		}
	}
}

func ts(d time.Duration) string  { return t0.Add(d).Format("2006-01-02T15:04:05.000000000Z") }
func tsMS(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

func TestMapping(t *testing.T) {
	st := mappingStore(t)
	out, res := export(t, st, Options{})
	if want := (Result{Sessions: 1, Events: 5, NetEvents: 3, DNSEvents: 2, Duration: res.Duration}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	db := openExport(t, out)
	sess, err := st.Session("s1")
	if err != nil {
		t.Fatal(err)
	}

	rows := queryRows(t, db, "SELECT * FROM sessions")
	if len(rows) != 1 {
		t.Fatalf("%d sessions", len(rows))
	}
	checkRow(t, "sessions", rows[0], map[string]any{
		"id": "s1", "started_at": ts(0), "started_at_ms": tsMS(0),
		"ended_at": sess.EndedAt.UTC().Format(tsLayout), "ended_at_ms": sess.EndedAt.UnixMilli(),
		"command": `["claude","-p","say \"hi\" <now>"]`, "exit_code": int64(3),
		"policy_sha256": "ab12", "image": "debian-12", "host": "box", "sandbox": "agent-1",
		"events": int64(5), "allowed": int64(2), "denied": int64(7 + 1 + 1), "dns": int64(2), "net": int64(3),
		"model_calls": int64(0), "input_tokens": int64(0), "output_tokens": int64(0), "cost_usd": 0.0, "lost": int64(0),
		"exec": int64(0), "fs": int64(0), "agent": int64(0),
	})
	if got, want := rows[0]["denied"], sess.Counts.Denied; got != want {
		t.Errorf("sessions.denied = %v, the store counts %d", got, want)
	}

	dns := queryRows(t, db, "SELECT * FROM dns_events ORDER BY id")
	if len(dns) != 2 {
		t.Fatalf("%d dns events", len(dns))
	}
	checkRow(t, "dns_events[1]", dns[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(1), "timestamp": ts(time.Millisecond), "timestamp_ms": tsMS(time.Millisecond),
		"qname": "api.example.com", "qtype": "A", "transport": "tcp", "decision": "allowed",
		"reason": "allowed by rule", "matched_rule": "*.example.com", "answer": "198.19.0.5", "resolver_asked": "8.8.8.8", "count": int64(1),
	})
	checkRow(t, "dns_events[2]", dns[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(5), "timestamp": ts(5 * time.Millisecond), "timestamp_ms": tsMS(5 * time.Millisecond),
		"qname": "evil.test", "qtype": "TXT", "transport": "udp", "decision": "denied",
		"reason": nil, "matched_rule": nil, "answer": "NXDOMAIN", "resolver_asked": nil, "count": int64(1),
	})

	net := queryRows(t, db, "SELECT * FROM net_events ORDER BY id")
	if len(net) != 3 {
		t.Fatalf("%d net events", len(net))
	}
	checkRow(t, "net_events[1]", net[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(2), "timestamp": ts(2 * time.Millisecond), "timestamp_ms": tsMS(2 * time.Millisecond),
		"domain": "api.example.com", "ip": "198.19.0.5", "port": int64(8443), "src_ip": "198.18.0.2", "src_port": int64(50123),
		"transport": "tcp", "conn_type": "https", "decision": "allowed", "direction": "outbound", "reason": "rule", "matched_rule": "*.example.com:8443",
		"http_version": "HTTP/2", "method": "POST", "path": "/v1/items", "query": "a=1&b=2", "status_code": int64(201),
		"bytes_sent": int64(1234), "bytes_received": int64(56789), "duration_ms": 1.5,
		"request_headers":      `[["Content-Type","application/json"],["X-Dup","1"],["X-Dup","2 <&>"]]`,
		"response_headers":     `[["Server","test"]]`,
		"request_body_preview": `{"q":"é"}`, "response_body_preview": "ok\uFFFD\x00end",
		"count": int64(1), "detail": "a detail",
	})
	checkRow(t, "net_events[2]", net[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(3), "timestamp": ts(3 * time.Millisecond), "timestamp_ms": tsMS(3 * time.Millisecond),
		"domain": nil, "ip": "2001:db8::1", "port": nil, "src_ip": nil, "src_port": nil,
		"transport": "ipv6", "conn_type": nil, "decision": "denied", "direction": "outbound", "reason": "ipv6 is not routed", "matched_rule": nil,
		"http_version": nil, "method": nil, "path": nil, "query": nil, "status_code": nil,
		"bytes_sent": int64(0), "bytes_received": int64(0), "duration_ms": 0.0,
		"request_headers": nil, "response_headers": nil, "request_body_preview": nil, "response_body_preview": nil,
		"count": int64(7), "detail": nil,
	})
	// Count 0 in the store means one event.
	if net[2]["count"] != int64(1) || net[2]["ip"] != nil {
		t.Errorf("bare net event: count %v ip %v, want 1 and NULL", net[2]["count"], net[2]["ip"])
	}

	// The text timestamps are ones SQLite's date functions understand.
	var ms int64
	if err := db.QueryRow(`SELECT CAST(round((julianday(timestamp) - 2440587.5) * 86400000) AS INTEGER) FROM net_events WHERE id = 1`).Scan(&ms); err != nil {
		t.Fatal(err)
	}
	if d := ms - tsMS(2*time.Millisecond); d < -1 || d > 1 {
		t.Errorf("julianday(timestamp) gives %d ms, timestamp_ms is %d", ms, tsMS(2*time.Millisecond))
	}
	// The other tables exist and are empty.
	for _, tbl := range []string{"model_calls", "tool_calls", "tool_responses", "mcp_calls", "fs_events", "exec_events", "other_events"} {
		if n := len(queryRows(t, db, "SELECT * FROM "+tbl)); n != 0 {
			t.Errorf("%s has %d rows, want 0", tbl, n)
		}
	}
}

// TestSessionCountsFromModelCalls checks that the session totals are a
// query over the exported tables: rows added to model_calls are counted.
func TestSessionCountsFromModelCalls(t *testing.T) {
	st := fillStore(t, 1, 4)
	defer st.Close()
	out, _ := export(t, st, Options{})
	// Re-run the count queries on a writable copy with two model calls.
	rw := openRW(t, out)
	for _, q := range []string{
		`INSERT INTO model_calls (id, session_id, seq, timestamp, timestamp_ms, input_tokens, output_tokens, estimated_cost_usd)
		 VALUES (1, 'bench-000', 100, 'x', 0, 10, 20, 0.5), (2, 'bench-000', 101, 'x', 0, 1, 2, 0.25)`,
	} {
		if _, err := rw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range sessionCounts[2:] {
		if _, err := rw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r := queryRows(t, rw, "SELECT model_calls, input_tokens, output_tokens, cost_usd FROM sessions")[0]
	checkRow(t, "sessions", r, map[string]any{"model_calls": int64(2), "input_tokens": int64(11), "output_tokens": int64(22), "cost_usd": 0.75})
}

func TestDeterministic(t *testing.T) {
	st := fillStore(t, 3, 50)
	defer st.Close()
	a, _ := export(t, st, Options{})
	b, _ := export(t, st, Options{})
	da, db := dump(t, openExport(t, a)), dump(t, openExport(t, b))
	if !reflect.DeepEqual(da, db) {
		t.Fatal("two exports of the same store differ")
	}
	if len(da["net_events"])+len(da["dns_events"]) != 150 {
		t.Fatalf("%d + %d event rows, want 150", len(da["net_events"]), len(da["dns_events"]))
	}
	// Also with scrubbing.
	a, _ = export(t, st, Options{Scrub: true})
	b, _ = export(t, st, Options{Scrub: true})
	if !reflect.DeepEqual(dump(t, openExport(t, a)), dump(t, openExport(t, b))) {
		t.Fatal("two scrubbed exports of the same store differ")
	}
}

// TestOrder checks ids follow sessions by start time (then id) and events
// by sequence, and every event appears once.
func TestOrder(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Started: b at t0, a and c at t0+1h (tie broken by id), written in
	// another order.
	for _, s := range []struct {
		id    string
		start time.Time
	}{{"c", t0.Add(time.Hour)}, {"b", t0}, {"a", t0.Add(time.Hour)}} {
		w, err := st.Begin(store.Session{ID: s.id, StartedAt: s.start})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			// Times deliberately out of order: seq decides.
			w.Append(store.Event{Time: s.start.Add(time.Duration(3-i) * time.Second), DNS: &store.DNS{QName: s.id, QType: "A"}})
		}
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := export(t, st, Options{})
	db := openExport(t, out)
	var got []string
	for _, r := range queryRows(t, db, "SELECT id, session_id, seq FROM dns_events ORDER BY id") {
		got = append(got, r["session_id"].(string)+":"+string(rune('0'+r["seq"].(int64))))
	}
	want := []string{"b:1", "b:2", "b:3", "a:1", "a:2", "a:3", "c:1", "c:2", "c:3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dns_events order = %v, want %v", got, want)
	}
	var sids []string
	for _, r := range queryRows(t, db, "SELECT id FROM sessions ORDER BY started_at, id") {
		sids = append(sids, r["id"].(string))
	}
	if !reflect.DeepEqual(sids, []string{"b", "a", "c"}) {
		t.Errorf("sessions = %v", sids)
	}
}

func TestSessionFilter(t *testing.T) {
	st := fillStore(t, 3, 10)
	defer st.Close()
	out, res := export(t, st, Options{Sessions: []string{"bench-002", "bench-000", "bench-002"}})
	if res.Sessions != 2 || res.Events != 20 {
		t.Errorf("result %+v, want 2 sessions and 20 events", res)
	}
	db := openExport(t, out)
	var ids []string
	for _, r := range queryRows(t, db, "SELECT id FROM sessions ORDER BY started_at") {
		ids = append(ids, r["id"].(string))
	}
	if !reflect.DeepEqual(ids, []string{"bench-000", "bench-002"}) {
		t.Errorf("sessions = %v", ids)
	}
	for _, tbl := range []string{"net_events", "dns_events"} {
		for _, r := range queryRows(t, db, "SELECT DISTINCT session_id FROM "+tbl) {
			if r["session_id"] == "bench-001" {
				t.Errorf("%s has events of an unselected session", tbl)
			}
		}
	}
	var n int64
	if err := db.QueryRow("SELECT (SELECT count(*) FROM net_events) + (SELECT count(*) FROM dns_events)").Scan(&n); err != nil || n != 20 {
		t.Errorf("%d event rows (%v), want 20", n, err)
	}
}

func TestUnknownSession(t *testing.T) {
	st := fillStore(t, 1, 2)
	defer st.Close()
	out := filepath.Join(t.TempDir(), "x.db")
	_, err := Export(context.Background(), st, out, Options{Sessions: []string{"bench-000", "nope"}})
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("err = %v, want one naming the session and wrapping store.ErrNotFound", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was left at %s (%v)", out, err)
	}
	assertNoTemp(t, filepath.Dir(out))
}

func TestRefuseOverwrite(t *testing.T) {
	st := fillStore(t, 1, 2)
	defer st.Close()
	out := filepath.Join(t.TempDir(), "x.db")
	if err := os.WriteFile(out, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Export(context.Background(), st, out, Options{})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("err = %v, want one wrapping fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "precious" {
		t.Fatal("the existing file was changed")
	}
	assertNoTemp(t, filepath.Dir(out))

	res, err := Export(context.Background(), st, out, Options{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 2 {
		t.Errorf("result %+v", res)
	}
	if rows := queryRows(t, openExport(t, out), "SELECT id FROM sessions"); len(rows) != 1 {
		t.Errorf("overwritten file has %d sessions", len(rows))
	}
	assertNoTemp(t, filepath.Dir(out))
}

// TestOddPath exports to a name holding URI syntax.
func TestOddPath(t *testing.T) {
	st := fillStore(t, 1, 3)
	defer st.Close()
	dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%41")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out?mode=ro#x%20.db")
	if _, err := Export(context.Background(), st, out, Options{}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != filepath.Base(out) {
		t.Fatalf("directory holds %v, want only %s", ents, filepath.Base(out))
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(b), "SQLite format 3\x00") {
		t.Fatalf("%s is not a SQLite file (%v)", out, err)
	}
}

func TestCancelledLeavesNothing(t *testing.T) {
	st := fillStore(t, 2, 5000)
	defer st.Close()
	out := filepath.Join(t.TempDir(), "x.db")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Export(ctx, st, out, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was left at %s", out)
	}
	assertNoTemp(t, filepath.Dir(out))
}

func TestEmptyStoreAndReadOnly(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Begin(store.Session{ID: "only"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{DNS: &store.DNS{QName: "x.test"}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ro, err := store.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	out, res := export(t, ro, Options{})
	if res.Sessions != 1 || res.DNSEvents != 1 {
		t.Errorf("result %+v", res)
	}
	r := queryRows(t, openExport(t, out), "SELECT ended_at, exit_code, command FROM sessions")[0]
	if r["exit_code"] != nil || r["command"] != nil || r["ended_at"] == nil {
		t.Errorf("session row %v: want exit_code and command NULL, ended_at set", r)
	}

	empty, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	out, res = export(t, empty, Options{})
	if res.Sessions != 0 || res.Events != 0 {
		t.Errorf("empty store: %+v", res)
	}
	if len(tableNames(t, openExport(t, out))) != len(schema) {
		t.Error("empty export lacks tables")
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func isChainColumn(name string) bool { return isChainColumnName(name) }
