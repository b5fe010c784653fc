package sqliteexport

import (
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// TestAgentEventsAndDNSCount: agent events become agent_events rows,
// dns_events.count carries an aggregated query's count, and the session's
// allowed/denied weigh DNS rows by it, agreeing with the store's counts.
func TestAgentEventsAndDNSCount(t *testing.T) {
	ms := time.Millisecond
	st := storeWith(t, []store.Event{
		{Time: t0.Add(1 * ms), DNS: &store.DNS{QName: "r1.flood.test", Decision: store.Denied, Answer: "NXDOMAIN", Count: 250}},
		{Time: t0.Add(2 * ms), DNS: &store.DNS{QName: "ok.test", Decision: store.Allowed}},
		{Time: t0.Add(3 * ms), Agent: &store.Agent{State: store.AgentSilent, Detail: "no answer to 3 pings in 15s"}},
		{Time: t0.Add(4 * ms), Agent: &store.Agent{State: store.AgentRateLimited, Count: 4000}},
		{Time: t0.Add(5 * ms), Agent: &store.Agent{State: store.AgentViolation, Detail: "ping flood"}},
	})
	sess, err := st.Session("s1")
	if err != nil {
		t.Fatal(err)
	}
	out, res := export(t, st, Options{})
	if want := (Result{Sessions: 1, Events: 5, DNSEvents: 2, AgentEvents: 3, Duration: res.Duration}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	db := openExport(t, out)
	for _, err := range VerifySchema(db, SchemaVersion) {
		t.Error(err)
	}
	dns := queryRows(t, db, "SELECT qname, count FROM dns_events ORDER BY id")
	checkRow(t, "dns_events[1]", dns[0], map[string]any{"qname": "r1.flood.test", "count": int64(250)})
	checkRow(t, "dns_events[2]", dns[1], map[string]any{"qname": "ok.test", "count": int64(1)})

	ag := queryRows(t, db, "SELECT * FROM agent_events ORDER BY id")
	if len(ag) != 3 {
		t.Fatalf("%d agent events", len(ag))
	}
	checkRow(t, "agent_events[1]", ag[0], map[string]any{
		"id": int64(1), "session_id": "s1", "seq": int64(3), "timestamp": ts(3 * ms), "timestamp_ms": tsMS(3 * ms),
		"state": "silent", "detail": "no answer to 3 pings in 15s", "count": int64(1),
	})
	checkRow(t, "agent_events[2]", ag[1], map[string]any{
		"id": int64(2), "session_id": "s1", "seq": int64(4), "timestamp": ts(4 * ms), "timestamp_ms": tsMS(4 * ms),
		"state": "rate-limited", "detail": nil, "count": int64(4000),
	})
	checkRow(t, "agent_events[3]", ag[2], map[string]any{
		"id": int64(3), "session_id": "s1", "seq": int64(5), "timestamp": ts(5 * ms), "timestamp_ms": tsMS(5 * ms),
		"state": "protocol-violation", "detail": "ping flood", "count": int64(1),
	})
	s := queryRows(t, db, "SELECT allowed, denied, dns, agent FROM sessions")
	checkRow(t, "sessions", s[0], map[string]any{"allowed": int64(1), "denied": int64(250), "dns": int64(2), "agent": int64(3)})
	if s[0]["allowed"] != sess.Counts.Allowed || s[0]["denied"] != sess.Counts.Denied {
		t.Errorf("sessions allowed/denied = %v/%v, the store counts %d/%d", s[0]["allowed"], s[0]["denied"], sess.Counts.Allowed, sess.Counts.Denied)
	}
}
