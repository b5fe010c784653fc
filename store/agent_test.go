package store

import (
	"reflect"
	"testing"
)

// TestAgentEventsAndWeightedCounts: agent events are stored and read back,
// their kind inferred from the payload, and the session's counts weigh DNS
// events by their Count (as Net events) and agent events per state by
// theirs, in the record written with each batch and in the one End writes.
func TestAgentEventsAndWeightedCounts(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{ID: "run"})
	w.Append(Event{DNS: &DNS{QName: "flood.test", Decision: Denied, Count: 500}})
	w.Append(Event{DNS: &DNS{QName: "ok.test", Decision: Allowed}})             // 0: one
	w.Append(Event{DNS: &DNS{QName: "ok.test", Decision: Allowed, Count: 1}})   // 1: one
	w.Append(Event{Net: &Net{Decision: Denied, Reason: "direct-ip", Count: 7}}) // as before
	w.Append(Event{Agent: &Agent{State: AgentSilent}})
	w.Append(Event{Agent: &Agent{State: AgentResumed}})
	w.Append(Event{Agent: &Agent{State: AgentRateLimited, Count: 1200, Detail: "fs events"}})
	w.Append(Event{Agent: &Agent{State: AgentRateLimited, Count: 30}})
	w.Append(Event{Agent: &Agent{State: AgentViolation, Detail: "ping flood"}})
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	want := Counts{
		Events:  9,
		Kinds:   map[Kind]int64{KindDNS: 3, KindNet: 1, KindAgent: 5},
		Allowed: 2, Denied: 500 + 7,
		Agent: map[string]int64{AgentSilent: 1, AgentResumed: 1, AgentRateLimited: 1230, AgentViolation: 1},
	}
	// The committer records the counts with the batch, before End.
	sess, err := s.Session("run")
	if err != nil {
		t.Fatal(err)
	}
	sess.Counts.Bytes = 0 // TestBudget checks them
	if !reflect.DeepEqual(sess.Counts, want) {
		t.Errorf("counts after Sync %+v, want %+v", sess.Counts, want)
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	if sess, err = s.Session("run"); err != nil {
		t.Fatal(err)
	}
	sess.Counts.Bytes = 0 // TestBudget checks them
	if !reflect.DeepEqual(sess.Counts, want) {
		t.Errorf("counts after End %+v, want %+v", sess.Counts, want)
	}
	evs := collect(t, s, "run")
	checkSeqs(t, evs, "run")
	if got := evs[6]; got.Kind != KindAgent || !reflect.DeepEqual(got.Agent, &Agent{State: AgentRateLimited, Count: 1200, Detail: "fs events"}) {
		t.Errorf("event 7 read back as %+v (agent %+v)", got, got.Agent)
	}
	if got := evs[0]; got.DNS == nil || got.DNS.Count != 500 {
		t.Errorf("event 1 read back as %+v", got.DNS)
	}
}

// TestOldSessionRecord: a session record written before Counts.Agent
// existed reads with no agent counts.
func TestOldSessionRecord(t *testing.T) {
	v := append([]byte{sessionVersion}, `{"id":"old","started_at":"2026-05-01T12:00:00Z","events":3,"kinds":{"dns":3},"denied":3}`...)
	sess, err := decodeSession(v)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Counts.Agent != nil || sess.Counts.Denied != 3 || sess.Counts.Events != 3 {
		t.Errorf("old record read as %+v", sess.Counts)
	}
}

// TestModelCallCounts: the session's counts sum its model calls' tokens
// and cost, in the record of each batch and across a reopen.
func TestModelCallCounts(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	w := beginT(t, s, Session{ID: "run"})
	w.Append(Event{ModelCall: &ModelCall{Provider: "anthropic", InputTokens: 100, OutputTokens: 20, CostUSD: 0.25}})
	w.Append(Event{ModelCall: &ModelCall{Provider: "anthropic", InputTokens: 50, OutputTokens: 5, CostUSD: 0.125}})
	w.Append(Event{DNS: &DNS{QName: "a.test", Decision: Allowed}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	sess, err := s.Session("run")
	if err != nil {
		t.Fatal(err)
	}
	c := sess.Counts
	if c.InputTokens != 150 || c.OutputTokens != 25 || c.CostUSD != 0.375 || c.Kinds[KindModelCall] != 2 {
		t.Errorf("counts %+v, want 150 input and 25 output tokens, $0.375, 2 model calls", c)
	}
}
