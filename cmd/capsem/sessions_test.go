package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

// TestSessionsMarkTheAgent: `capsem sessions` (table and --json) and
// `capsem inspect` say when the guest agent went silent, was cut off or
// had reports dropped, and say nothing for a session without such events.
func TestSessionsMarkTheAgent(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		id     string
		events []store.Agent
	}{
		{"20260101T000000Z-quiet0", nil},
		{"20260102T000000Z-silent", []store.Agent{{State: store.AgentSilent}}},
		{"20260103T000000Z-cutoff", []store.Agent{{State: store.AgentSilent}, {State: store.AgentResumed},
			{State: store.AgentRateLimited, Count: 900}, {State: store.AgentViolation, Detail: "ping flood"}}},
	} {
		w, err := st.Begin(store.Session{ID: s.id, Command: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range s.events {
			w.Append(store.Event{Agent: &a})
		}
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	var stdout, stderr bytes.Buffer
	if code := run([]string{"capsem", "sessions", "--data", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("sessions: exit %d: %s", code, stderr.String())
	}
	t.Log("\n" + stdout.String())
	for _, want := range []string{
		`(?m)^ID .* AGENT +COMMAND$`,
		`(?m)^20260103T000000Z-cutoff .* cut off, was silent, 900 dropped +true$`,
		`(?m)^20260102T000000Z-silent .* silent +true$`,
		`(?m)^20260101T000000Z-quiet0 .* - +true$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout.String()) {
			t.Errorf("sessions output does not match %q", want)
		}
	}

	stdout.Reset()
	if code := run([]string{"capsem", "sessions", "--data", dir, "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("sessions --json: exit %d: %s", code, stderr.String())
	}
	var sums []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &sums); err != nil || len(sums) != 3 {
		t.Fatalf("sessions --json: %v\n%s", err, stdout.String())
	}
	for i, want := range []struct {
		silent, cutOff bool
		dropped        float64
	}{{true, true, 900}, {true, false, 0}, {false, false, 0}} {
		if sums[i]["agent_silent"] != want.silent || sums[i]["agent_cut_off"] != want.cutOff || sums[i]["agent_events_dropped"] != want.dropped {
			t.Errorf("session %v: agent_silent %v, agent_cut_off %v, agent_events_dropped %v; want %+v",
				sums[i]["id"], sums[i]["agent_silent"], sums[i]["agent_cut_off"], sums[i]["agent_events_dropped"], want)
		}
	}

	stdout.Reset()
	if code := run([]string{"capsem", "inspect", "--data", dir, "20260103T000000Z-cutoff"}, &stdout, &stderr); code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"agent cut off, was silent, 900 dropped", `agent_events +4\n`, "state=protocol-violation  count=1  detail=ping flood",
		"state=rate-limited  count=900"} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

// TestNoSessionEndedYet: on a data directory where no session has ended
// (the main store does not exist yet), sessions lists none instead of
// failing, and inspect and export say why there is nothing to read.
func TestNoSessionEndedYet(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		out  string
		why  string
	}{
		{[]string{"sessions"}, 0, "no sessions in ", "an empty list, not pebble's \"database does not exist\""},
		{[]string{"sessions", "--json"}, 0, "[]", "an empty JSON array"},
		{[]string{"inspect"}, 1, "no sessions in ", "nothing to inspect"},
		{[]string{"inspect", "20260101T000000Z-abcdef"}, 1, "no session has ended in ", "a named session that is nowhere"},
		{[]string{"export", "--sqlite", dir + "/out.db", "--all"}, 1, "no session has ended in ", "--all exports the finished sessions"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"capsem", c.args[0], "--data", dir}, c.args[1:]...)
		code := run(args, &stdout, &stderr)
		got := stdout.String() + stderr.String()
		if code != c.code || !strings.Contains(got, c.out) {
			t.Errorf("capsem %s: exit %d, want %d; output %q, want it to contain %q (%s)", strings.Join(c.args, " "), code, c.code, got, c.out, c.why)
		}
	}
}
