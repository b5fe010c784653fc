package sqliteexport

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/store"
)

// The reader's tests are round trips: a store holding every kind of event
// with every field set is exported and read back, and what the reader
// gives must equal what the store gives, after normalising only what the
// export loses (see normaliseEvent and normaliseSession, and the list at
// the top of readrows.go):
//
//   - invalid UTF-8 becomes U+FFFD; with Scrub, text is dlp.Scrub'd,
//     headers dlp.ScrubHeader'd and argv dlp.ScrubArgv'd, as the export does;
//   - Net.Count, DNS.Count and Agent.Count of 0 read as 1;
//   - Counts.Bytes is not exported (0), Counts.CostUSD is the export's sum
//     (equal up to float rounding).
//
// Times, Event.Session, Event.Kind and Seq come back exactly.

// plantedSecret is planted in some fields to see scrubbing go through the reader.
const plantedSecret = "sk-ant-api03-ReaderTestSecret0123456789abcdefABCDEF"

// fullEvents are one event of every kind with every field set, a model
// call with several tool calls and results (one of each all zero), an
// event of a kind this build does not know, and events whose counts are 0.
func fullEvents() []store.Event {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms)*time.Millisecond + 7) } // sub-millisecond on purpose
	return []store.Event{
		{Time: at(1), DNS: &store.DNS{QName: "api.example.com", QType: "AAAA", Transport: store.TransportTCP,
			Decision: store.Denied, Reason: "not in the allow list", MatchedRule: "default deny", Answer: "NXDOMAIN",
			ResolverAsked: netip.MustParseAddr("2001:db8::53"), Count: 1 << 33}},
		{Time: at(2), Net: &store.Net{Domain: "api.anthropic.com", IP: netip.MustParseAddr("198.19.0.7"), Port: 443,
			SrcIP: netip.MustParseAddr("198.18.0.2"), SrcPort: 51234, Transport: store.TransportUDP, ConnType: store.ConnHTTPS,
			Decision: store.Allowed, Direction: store.Inbound, Reason: "domain allowed by policy", MatchedRule: "allow api.anthropic.com:443",
			HTTPVersion: store.HTTP3, Method: "POST", Path: "/v1/messages", Query: "beta=true&x=é", StatusCode: 200,
			BytesSent: 1234, BytesReceived: 98765, Duration: 1532*time.Millisecond + 17*time.Nanosecond,
			RequestHeaders: []store.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Dup", Value: "1"},
				{Name: "X-Dup", Value: "2 <&>"}, {Name: "", Value: ""}, {Name: "Authorization", Value: "Bearer " + plantedSecret}},
			ResponseHeaders:     []store.Header{{Name: "Server", Value: "cloudflare"}},
			RequestBodyPreview:  `{"model":"claude"}`,
			ResponseBodyPreview: "\x00\xff binary \xfe",
			Count:               3, Detail: "key " + plantedSecret}},
		{Time: at(3), ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-sonnet-4",
			Method: "POST", Path: "/v1/messages", Stream: true, SystemPromptPreview: "You are a helpful agent.",
			MessagesCount: 7, ToolsCount: 12, RequestBytes: 23456, RequestBodyPreview: `{"model":"claude-sonnet-4","stream":true}`,
			MessageID: "msg_01XYZ", StatusCode: 200, TextContent: "Let me look at the file. " + plantedSecret,
			ThinkingContent: "The user wants \x00\xff bytes", StopReason: "tool_use",
			InputTokens: 1500, OutputTokens: 320, CacheReadTokens: 1 << 40, CacheWriteTokens: 64,
			Duration: 2718*time.Millisecond + 3, ResponseBytes: 9876, CostUSD: 0.0123456789, TraceID: "trace-7",
			UsageDetails: `{"input_tokens":1500,"output_tokens":320}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "toolu_01", Name: "bash", Arguments: `{"command":"ls"}`, Origin: "native"},
				{Index: 1, CallID: "toolu_02", Name: "mcp__srv__echo", Arguments: strings.Repeat("x", 300), Origin: "mcp"},
				{},
				{Index: -1, Name: "odd"},
			},
			ToolResults: []store.ToolResult{
				{CallID: "toolu_00", ContentPreview: "file1\nfile2"},
				{CallID: "toolu_0a", ContentPreview: "permission denied", IsError: true},
				{},
			}}},
		{Time: at(4), MCPCall: &store.MCPCall{ServerName: "srv", Method: "tools/call", ToolName: "echo", RequestID: `"7"`,
			RequestPreview: `{"name":"echo"}`, ResponsePreview: `{"content":[]}`, Decision: store.Denied, Reason: "rule",
			MatchedRule: "deny echo", Duration: 12*time.Millisecond + 345*time.Microsecond, ErrorMessage: "denied",
			BytesSent: 100, BytesReceived: 200}},
		{Time: at(5), Exec: &store.Exec{Argv: []string{"sh", "-c", "echo 'hi' > out.txt", "", "é\x00\xff", "--token=" + plantedSecret},
			Dir: "/workspace/sub dir", TTY: true, PID: 4242, Start: time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC),
			Duration: 1234567 * time.Microsecond, ExitCode: 137, Signal: "KILL"}},
		{Time: at(6), FS: &store.FS{Action: store.FSRenamed, Path: "src/new name.go", OldPath: "src/old.go", Size: 1 << 33,
			Dir: true, GuestTime: time.Date(2000, 1, 1, 0, 0, 0, 1, time.UTC)}},
		{Time: at(7), Agent: &store.Agent{State: store.AgentRateLimited, Detail: "fs events over 1000/s", Count: 12345}},
		{Time: at(8), Recording: &store.Recording{State: store.RecordingUnstored, Detail: "disk full", Count: 9}},
		{Time: at(9), Kind: "a_future_kind"},
		// Zero counts (read back as 1), a bare event of each kind.
		{Time: at(10), Net: &store.Net{Decision: store.Denied}},
		{Time: at(11), DNS: &store.DNS{QName: "a.test"}},
		{Time: at(12), Agent: &store.Agent{State: store.AgentSilent}},
		{Time: at(13), Exec: &store.Exec{ExitCode: -1}},
		{Time: at(14), FS: &store.FS{Action: store.FSCreated, Path: "a"}},
		{Time: at(15), ModelCall: &store.ModelCall{Model: "m"}},
		{Time: at(16), MCPCall: &store.MCPCall{Method: "notifications/initialized"}},
		{Time: at(17), Recording: &store.Recording{State: store.RecordingResumed}},
	}
}

// fullSession is a session with every field set.
func fullSession(id string, started time.Time) store.Session {
	return store.Session{ID: id, StartedAt: started, Command: []string{"claude", "-p", "say \"hi\" <now>", "", "--key=" + plantedSecret},
		PolicySHA256: "ab12", Image: "debian-12", Host: "box", Sandbox: "agent-1"}
}

// addSession begins sess in st, appends events and ends it with code
// (nil: left running, as a crashed writer leaves it).
func addSession(t *testing.T, st *store.Store, sess store.Session, events []store.Event, end bool, code *int) {
	t.Helper()
	w, err := st.Begin(sess)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		w.Append(ev)
	}
	if end {
		if err := w.End(code); err != nil {
			t.Fatal(err)
		}
	} else if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
}

func newReaderStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// exportAndOpen exports st and opens the file with OpenReader; the reader
// is closed with the test.
func exportAndOpen(t *testing.T, st *store.Store, opt Options) (*Reader, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "export.db")
	if _, err := Export(context.Background(), st, path, opt); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r, path
}

type eventSource interface {
	EventsAfter(id string, after uint64, fn func(store.Event) error) error
}

func readAll(t *testing.T, src eventSource, id string, after uint64) []store.Event {
	t.Helper()
	var out []store.Event
	if err := src.EventsAfter(id, after, func(ev store.Event) error { out = append(out, ev); return nil }); err != nil {
		t.Fatalf("EventsAfter(%q, %d): %v", id, after, err)
	}
	return out
}

// text is what the export makes of a text value.
func exportedText(s string, scrub bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if scrub {
		s = dlp.Scrub(s)
	}
	return s
}

func exportedArgv(words []string, scrub bool) []string {
	if len(words) == 0 {
		return nil
	}
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strings.ToValidUTF8(w, "\uFFFD")
	}
	if scrub {
		out = dlp.ScrubArgv(out)
	}
	return out
}

// normaliseStrings applies text to every string field of the struct p
// points to, but those listed in skip.
func normaliseStrings(p any, scrub bool, skip ...string) {
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.String && !slices.Contains(skip, v.Type().Field(i).Name) {
			f.SetString(exportedText(f.String(), scrub))
		}
	}
}

// normaliseEvent returns ev as the export gives it back (see the top of
// this file). The payload is copied: ev's is not changed.
func normaliseEvent(ev store.Event, scrub bool) store.Event {
	switch {
	case ev.DNS != nil:
		d := *ev.DNS
		normaliseStrings(&d, scrub)
		d.Count = max(d.Count, 1)
		ev.DNS = &d
	case ev.Net != nil:
		n := *ev.Net
		normaliseStrings(&n, scrub)
		n.Count = max(n.Count, 1)
		if n.Direction == "" {
			n.Direction = store.Outbound
		}
		hs := func(in []store.Header) []store.Header {
			if len(in) == 0 {
				return nil
			}
			out := make([]store.Header, len(in))
			for i, h := range in {
				name, value := strings.ToValidUTF8(h.Name, "\uFFFD"), strings.ToValidUTF8(h.Value, "\uFFFD")
				if scrub {
					name, value = dlp.ScrubHeader(name, value)
				}
				out[i] = store.Header{Name: name, Value: value}
			}
			return out
		}
		n.RequestHeaders, n.ResponseHeaders = hs(n.RequestHeaders), hs(n.ResponseHeaders)
		ev.Net = &n
	case ev.ModelCall != nil:
		m := *ev.ModelCall
		normaliseStrings(&m, scrub)
		m.ToolCalls, m.ToolResults = nil, nil
		for _, tc := range ev.ModelCall.ToolCalls {
			normaliseStrings(&tc, scrub)
			m.ToolCalls = append(m.ToolCalls, tc)
		}
		for _, tr := range ev.ModelCall.ToolResults {
			normaliseStrings(&tr, scrub)
			m.ToolResults = append(m.ToolResults, tr)
		}
		ev.ModelCall = &m
	case ev.MCPCall != nil:
		m := *ev.MCPCall
		normaliseStrings(&m, scrub)
		ev.MCPCall = &m
	case ev.Exec != nil:
		x := *ev.Exec
		normaliseStrings(&x, scrub)
		x.Argv = exportedArgv(x.Argv, scrub)
		ev.Exec = &x
	case ev.FS != nil:
		f := *ev.FS
		normaliseStrings(&f, scrub)
		ev.FS = &f
	case ev.Agent != nil:
		a := *ev.Agent
		normaliseStrings(&a, scrub)
		a.Count = max(a.Count, 1)
		ev.Agent = &a
	case ev.Recording != nil:
		r := *ev.Recording
		normaliseStrings(&r, scrub)
		ev.Recording = &r
	default:
		ev.Kind = store.Kind(exportedText(string(ev.Kind), scrub))
	}
	return ev
}

// normaliseSession returns s as the export gives it back.
func normaliseSession(s store.Session, scrub bool) store.Session {
	normaliseStrings(&s, scrub, "ID")
	s.Command = exportedArgv(s.Command, scrub)
	s.Counts.Bytes = 0
	return s
}

// sameCost sets got's CostUSD to want's when they differ by float rounding
// only (the export sums model_calls again).
func sameCost(got *store.Session, want store.Session) {
	if math.Abs(got.Counts.CostUSD-want.Counts.CostUSD) <= 1e-9*math.Abs(want.Counts.CostUSD) {
		got.Counts.CostUSD = want.Counts.CostUSD
	}
}

func diffEvents(t *testing.T, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("event %d (seq %d):\n got %s\nwant %s", i, want[i].Seq, showEvent(got[i]), showEvent(want[i]))
		}
	}
}

// show prints an event with its payload.
func showEvent(ev store.Event) string {
	var p any
	switch {
	case ev.DNS != nil:
		p = *ev.DNS
	case ev.Net != nil:
		p = *ev.Net
	case ev.ModelCall != nil:
		p = *ev.ModelCall
	case ev.MCPCall != nil:
		p = *ev.MCPCall
	case ev.Exec != nil:
		p = *ev.Exec
	case ev.FS != nil:
		p = *ev.FS
	case ev.Agent != nil:
		p = *ev.Agent
	case ev.Recording != nil:
		p = *ev.Recording
	}
	return fmt.Sprintf("%s %d %s %s %+v", ev.Session, ev.Seq, ev.Time.Format(time.RFC3339Nano), ev.Kind, p)
}

// TestReaderRoundTrip exports a session of every kind of event with every
// field set, plain and scrubbed, and reads it back: the session and the
// events equal the store's, normalised as the export loses.
func TestReaderRoundTrip(t *testing.T) {
	st := newReaderStore(t)
	code := 3
	addSession(t, st, fullSession("s1", t0), fullEvents(), true, &code)
	wantSess, err := st.Session("s1")
	if err != nil {
		t.Fatal(err)
	}
	stored := readAll(t, st, "s1", 0)
	if len(stored) != len(fullEvents()) {
		t.Fatalf("the store has %d events, want %d", len(stored), len(fullEvents()))
	}
	for _, scrub := range []bool{false, true} {
		t.Run(fmt.Sprintf("scrub=%v", scrub), func(t *testing.T) {
			r, path := exportAndOpen(t, st, Options{Scrub: scrub})
			before := fileSum(t, path)

			got, err := r.Session("s1")
			if err != nil {
				t.Fatal(err)
			}
			want := normaliseSession(wantSess, scrub)
			sameCost(&got, want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Session:\n got %+v\nwant %+v", got, want)
			}
			list, err := r.Sessions()
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 {
				t.Fatalf("Sessions: %d, want 1", len(list))
			}
			sameCost(&list[0], want)
			if !reflect.DeepEqual(list[0], want) {
				t.Errorf("Sessions()[0]:\n got %+v\nwant %+v", list[0], want)
			}

			var wantEvents []store.Event
			for _, ev := range stored {
				wantEvents = append(wantEvents, normaliseEvent(ev, scrub))
			}
			gotEvents := readAll(t, r, "s1", 0)
			diffEvents(t, gotEvents, wantEvents)

			secretsLeft := strings.Contains(fmt.Sprint(gotEvents), plantedSecret) ||
				strings.Contains(fmt.Sprintf("%+v", *gotEvents[1].Net), plantedSecret) ||
				strings.Contains(strings.Join(gotEvents[4].Exec.Argv, " "), plantedSecret)
			if secretsLeft == scrub {
				t.Errorf("scrub=%v, yet the plantedSecret is there: %v", scrub, secretsLeft)
			}
			if after := fileSum(t, path); after != before {
				t.Error("reading changed the file")
			}
		})
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// manyEvents are n events of every kind in turn, model calls with tool
// calls and results, so that every table needs several chunks.
func manyEvents(n int) []store.Event {
	full := fullEvents()
	out := make([]store.Event, 0, n)
	for i := range n {
		ev := full[(i*7)%len(full)]
		ev.Time = t0.Add(time.Duration(i) * time.Microsecond)
		if ev.Net != nil {
			nn := *ev.Net
			nn.Detail = fmt.Sprintf("net %d", i)
			ev.Net = &nn
		}
		out = append(out, ev)
	}
	return out
}

// TestReaderEventsAfter reads a session of several thousand events, whole
// (through every chunk size) and from the middle, from a chunk's edge,
// from the last event and from past it.
func TestReaderEventsAfter(t *testing.T) {
	st := newReaderStore(t)
	const n = 5000
	addSession(t, st, fullSession("big", t0), manyEvents(n), true, nil)
	stored := readAll(t, st, "big", 0)
	if len(stored) != n {
		t.Fatalf("the store has %d events, want %d", len(stored), n)
	}
	r, _ := exportAndOpen(t, st, Options{})
	for _, after := range []uint64{0, 1, firstChunk, n / 2, n - 1, n, n + 10, math.MaxInt64, math.MaxUint64} {
		var want []store.Event
		for _, ev := range stored {
			if ev.Seq > after {
				want = append(want, normaliseEvent(ev, false))
			}
		}
		got := readAll(t, r, "big", after)
		if len(got) > 0 && got[0].Seq != after+1 {
			t.Errorf("after %d: first seq %d", after, got[0].Seq)
		}
		diffEvents(t, got, want)
	}
}

// TestReaderStopsOnError: the error fn returns is returned as is, and no
// event follows it.
func TestReaderStopsOnError(t *testing.T) {
	st := newReaderStore(t)
	addSession(t, st, fullSession("s1", t0), manyEvents(300), true, nil)
	r, _ := exportAndOpen(t, st, Options{})
	stop := errors.New("enough")
	var seen []uint64
	err := r.EventsAfter("s1", 10, func(ev store.Event) error {
		seen = append(seen, ev.Seq)
		if ev.Seq == 150 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("EventsAfter returned %v, want fn's error as is", err)
	}
	if len(seen) != 140 || seen[0] != 11 || seen[len(seen)-1] != 150 {
		t.Errorf("saw %d events, %v … %v; want 11 to 150", len(seen), seen[0], seen[len(seen)-1])
	}
}

// TestReaderUnknownSession: an id not in the file is store.ErrNotFound for
// Session and EventsAfter, and fn is not called.
func TestReaderUnknownSession(t *testing.T) {
	st := newReaderStore(t)
	addSession(t, st, fullSession("s1", t0), fullEvents()[:2], true, nil)
	r, _ := exportAndOpen(t, st, Options{})
	if _, err := r.Session("nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session: %v, want ErrNotFound", err)
	}
	err := r.EventsAfter("nope", 0, func(store.Event) error { t.Error("fn called"); return nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EventsAfter: %v, want ErrNotFound", err)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "sqliteexport: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
}

// TestReaderSessionsOrder: newest first, whatever the export's order; a
// session left running has no end and no exit code; counts per session.
func TestReaderSessionsOrder(t *testing.T) {
	st := newReaderStore(t)
	code := 0
	addSession(t, st, fullSession("old", t0), fullEvents(), true, &code)
	addSession(t, st, store.Session{ID: "new", StartedAt: t0.Add(time.Hour)}, fullEvents()[:3], false, nil)
	r, _ := exportAndOpen(t, st, Options{})
	got, err := r.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "new" || got[1].ID != "old" {
		t.Fatalf("Sessions: %v, want new then old", sessionIDs(got))
	}
	for i := range want {
		w := normaliseSession(want[i], false)
		sameCost(&got[i], w)
		if !reflect.DeepEqual(got[i], w) {
			t.Errorf("session %s:\n got %+v\nwant %+v", w.ID, got[i], w)
		}
	}
	if !got[0].EndedAt.IsZero() || got[0].ExitCode != nil {
		t.Errorf("running session: ended %v, exit code %v", got[0].EndedAt, got[0].ExitCode)
	}
	if n := len(readAll(t, r, "new", 0)); n != 3 {
		t.Errorf("new: %d events, want 3", n)
	}
}

func sessionIDs(ss []store.Session) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// TestReaderOtherVersion: a file of another schema version, or not an
// export at all, is refused with an error that says what to do.
func TestReaderOtherVersion(t *testing.T) {
	st := newReaderStore(t)
	addSession(t, st, fullSession("s1", t0), fullEvents()[:2], true, nil)
	path := filepath.Join(t.TempDir(), "export.db")
	if _, err := Export(context.Background(), st, path, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pragma string
		want   []string
	}{
		{"PRAGMA user_version = 4", []string{"sqliteexport: ", "schema version 4", fmt.Sprint(SchemaVersion), "older capsem", "export the session again with this capsem"}},
		{fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1), []string{"newer capsem", "export the session again"}},
		{"PRAGMA application_id = 0", []string{"sqliteexport: ", "is not a capsem export"}},
	} {
		db := openRW(t, path)
		if _, err := db.Exec(tc.pragma); err != nil {
			t.Fatal(err)
		}
		var file string
		if err := db.QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
			t.Fatal(err)
		}
		db.Close()
		r, err := OpenReader(file)
		if err == nil {
			r.Close()
			t.Errorf("%s: OpenReader succeeded", tc.pragma)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.pragma, err, w)
			}
		}
	}
	if _, err := OpenReader(filepath.Join(t.TempDir(), "missing.db")); err == nil {
		t.Error("OpenReader of a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "missing.db")); err == nil {
		t.Error("OpenReader created the missing file")
	}
}

// TestReaderFixture reads the committed real export, tests/fixtures/session.db:
// every session yields as many events as its events column says, in seq
// order 1, 2, 3, …, with as many of each kind as its tables have rows (the
// tool calls and results attached to their model calls), and the counts
// the reader gives agree.
func TestReaderFixture(t *testing.T) {
	path := filepath.Join("..", "..", "tests", "fixtures", "session.db")
	before := fileSum(t, path)
	r, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	db := openExport(t, path)
	sessions, err := r.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) == 0 {
		t.Fatal("no sessions in the fixture")
	}
	tables := map[store.Kind]string{store.KindDNS: "dns_events", store.KindNet: "net_events", store.KindModelCall: "model_calls",
		store.KindMCPCall: "mcp_calls", store.KindExec: "exec_events", store.KindFS: "fs_events", store.KindAgent: "agent_events",
		store.KindRecording: "recording_events"}
	for _, s := range sessions {
		var column int64
		if err := db.QueryRow("SELECT events FROM sessions WHERE id = ?", s.ID).Scan(&column); err != nil {
			t.Fatal(err)
		}
		kinds := map[store.Kind]int64{}
		var toolCalls, toolResults int64
		var n int64
		err := r.EventsAfter(s.ID, 0, func(ev store.Event) error {
			n++
			if ev.Seq != uint64(n) {
				return fmt.Errorf("event %d has seq %d", n, ev.Seq)
			}
			if ev.Session != s.ID || ev.Time.IsZero() {
				return fmt.Errorf("seq %d: session %q, time %v", ev.Seq, ev.Session, ev.Time)
			}
			kinds[ev.Kind]++
			if ev.ModelCall != nil {
				toolCalls += int64(len(ev.ModelCall.ToolCalls))
				toolResults += int64(len(ev.ModelCall.ToolResults))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != column || n != s.Counts.Events {
			t.Errorf("%s: read %d events; the events column says %d, Counts.Events %d", s.ID, n, column, s.Counts.Events)
		}
		for kind, table := range tables {
			var rows int64
			if err := db.QueryRow("SELECT count(*) FROM "+table+" WHERE session_id = ?", s.ID).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if kinds[kind] != rows {
				t.Errorf("%s: %d %s events, %s has %d rows", s.ID, kinds[kind], kind, table, rows)
			}
			if s.Counts.Kinds[kind] != rows {
				t.Errorf("%s: Counts.Kinds[%s] = %d, %s has %d rows", s.ID, kind, s.Counts.Kinds[kind], table, rows)
			}
		}
		for _, c := range []struct {
			table string
			n     int64
		}{{"tool_calls", toolCalls}, {"tool_responses", toolResults}} {
			var rows int64
			if err := db.QueryRow("SELECT count(*) FROM "+c.table+" WHERE session_id = ?", s.ID).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if c.n != rows {
				t.Errorf("%s: %d attached to model calls, %s has %d rows", s.ID, c.n, c.table, rows)
			}
		}
		// The fixture is a real run: these kinds are in it (TestSessionFixture
		// in tests/ keeps it so).
		for _, k := range []store.Kind{store.KindDNS, store.KindNet, store.KindModelCall, store.KindMCPCall, store.KindExec, store.KindFS} {
			if kinds[k] == 0 {
				t.Errorf("%s: no %s events read", s.ID, k)
			}
		}
		if toolCalls == 0 || toolResults == 0 {
			t.Errorf("%s: %d tool calls, %d tool results read", s.ID, toolCalls, toolResults)
		}
	}
	if fileSum(t, path) != before {
		t.Error("reading changed the fixture")
	}
}

// TestReaderHostileFile: a file someone sent is not trusted. Seqs that are
// not increasing integers (a REAL between two integers, a repeat) are an
// error, not a read that starts over forever; a view in place of a table
// (which could compute rows without end), or the unique index that keeps
// seqs apart dropped, is refused at open.
func TestReaderHostileFile(t *testing.T) {
	var evs []store.Event
	for i := 0; i < 3000; i++ {
		evs = append(evs, store.Event{Time: t0.Add(time.Duration(i) * time.Millisecond), Agent: &store.Agent{State: store.AgentSilent}})
	}
	for _, tc := range []struct {
		edit, want, why string
		atOpen          bool
	}{
		{`UPDATE agent_events SET seq = 1 + seq / 10000.0`, "is not an integer above 0", "seqs between 1 and 2: cut to 1, every chunk would start over", false},
		{`DROP INDEX IF EXISTS agent_events_session_seq; UPDATE agent_events SET seq = 5`, `lacks index "agent_events_session_seq"`, "every row the same seq", true},
		{`UPDATE agent_events SET seq = seq * 1e300`, "is not an integer above 0", "seqs past int64: a conversion made them MinInt64 and the table was read again", false},
		{`UPDATE agent_events SET id = 1000000 - id`, "numbers a session's rows in seq order",
			"ids against seq order: how an index that names one row under many seqs shows, which would hand it out again and again", false},
		{`ALTER TABLE net_events RENAME TO net_events_old; CREATE VIEW net_events AS SELECT * FROM net_events_old`, "not a capsem export (or one from another version)", "a view in place of a table", true},
	} {
		st := newReaderStore(t)
		addSession(t, st, fullSession("s1", t0), evs, true, nil)
		path := filepath.Join(t.TempDir(), "export.db")
		if _, err := Export(context.Background(), st, path, Options{}); err != nil {
			t.Fatal(err)
		}
		db := openRW(t, path)
		if _, err := db.Exec(tc.edit); err != nil {
			t.Fatalf("%s: %v", tc.why, err)
		}
		var file string // openRW's copy
		if err := db.QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
			t.Fatal(err)
		}
		db.Close()
		r, err := OpenReader(file)
		if tc.atOpen {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: OpenReader: %v, want an error saying %q", tc.why, err, tc.want)
			}
			if r != nil {
				r.Close()
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = r.EventsAfter("s1", 0, func(store.Event) error {
			if n++; n > len(evs) {
				return errors.New("read more events than the file holds")
			}
			return nil
		})
		r.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: EventsAfter after %d events: %v, want an error saying %q", tc.why, n, err, tc.want)
		}
	}
}
