package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func beginT(t *testing.T, s *Store, meta Session) *Writer {
	t.Helper()
	w, err := s.Begin(meta)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	return w
}

func collect(t *testing.T, s *Store, id string) []Event {
	t.Helper()
	var evs []Event
	if err := s.Events(id, func(ev Event) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatalf("Events(%s): %v", id, err)
	}
	return evs
}

// checkSeqs verifies that evs are numbered 1..len(evs) in order and belong
// to session id.
func checkSeqs(t *testing.T, evs []Event, id string) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: gap, duplicate or disorder", i, ev.Seq)
		}
		if ev.Session != id {
			t.Fatalf("event %d has session %q, want %q", i, ev.Session, id)
		}
		if ev.Time.IsZero() {
			t.Fatalf("event %d has no time", i)
		}
	}
}

func TestAppendConcurrent(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{Command: []string{"claude", "-p", "hi"}})
	const G, N = 8, 6000 // 48000 events: several full batches
	var wg sync.WaitGroup
	for g := range G {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n Net // reused: Append must copy
			for i := range N {
				if i%3 == 0 {
					w.Append(Event{DNS: &DNS{QName: fmt.Sprintf("g%d-%d", g, i), Decision: Denied}})
					continue
				}
				n = Net{Detail: fmt.Sprintf("g%d-%d", g, i), Port: uint16(i), IP: netip.AddrFrom4([4]byte{198, 19, 0, byte(g)}),
					Decision: Allowed}
				w.Append(Event{Kind: KindNet, Net: &n})
			}
		}()
	}
	wg.Wait()
	if err := w.End(nil); err != nil {
		t.Fatalf("End: %v", err)
	}

	evs := collect(t, s, w.ID())
	if len(evs) != G*N {
		t.Fatalf("got %d events, want %d", len(evs), G*N)
	}
	checkSeqs(t, evs, w.ID())
	next := make([]int, G) // per goroutine, the next index expected
	for _, ev := range evs {
		var tag string
		switch ev.Kind {
		case KindDNS:
			tag = ev.DNS.QName
		case KindNet:
			tag = ev.Net.Detail
		default:
			t.Fatalf("seq %d: kind %q", ev.Seq, ev.Kind)
		}
		var g, i int
		if _, err := fmt.Sscanf(tag, "g%d-%d", &g, &i); err != nil {
			t.Fatalf("seq %d: tag %q: %v", ev.Seq, tag, err)
		}
		if i != next[g] {
			t.Fatalf("seq %d: goroutine %d event %d, want %d (lost, duplicated or reordered)", ev.Seq, g, i, next[g])
		}
		next[g]++
		if ev.Kind == KindNet && (ev.Net.Port != uint16(i) || ev.Net.IP.As4()[3] != byte(g)) {
			t.Fatalf("seq %d: payload mixed up: %+v", ev.Seq, ev.Net)
		}
	}

	sess, err := s.Session(w.ID())
	if err != nil {
		t.Fatal(err)
	}
	dns := int64(G * ((N + 2) / 3))
	want := Counts{Events: G * N, Kinds: map[Kind]int64{KindDNS: dns, KindNet: G*N - dns}, Allowed: G*N - dns, Denied: dns}
	if sess.Counts.Bytes <= 0 {
		t.Errorf("counts %+v: no bytes", sess.Counts)
	}
	sess.Counts.Bytes = 0
	if fmt.Sprint(sess.Counts) != fmt.Sprint(want) {
		t.Fatalf("counts %+v, want %+v", sess.Counts, want)
	}
}

func TestSyncDurable(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	w := beginT(t, s, Session{})
	for round := 1; round <= 5; round++ {
		for i := range 1000 * round {
			w.Append(Event{Net: &Net{Port: uint16(i), Decision: Denied, Count: 2}})
		}
		if err := w.Sync(); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		// After Sync, both the events and the counts written with them
		// are in the store, without End.
		want := 1000 * round * (round + 1) / 2
		if got := len(collect(t, s, w.ID())); got != want {
			t.Fatalf("round %d: %d events after Sync, want %d", round, got, want)
		}
		sess, err := s.Session(w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if sess.Counts.Events != int64(want) || sess.Counts.Denied != int64(2*want) || !sess.EndedAt.IsZero() {
			t.Fatalf("round %d: session %+v", round, sess)
		}
	}
	if err := w.Sync(); err != nil { // nothing new: returns at once
		t.Fatal(err)
	}
}

func TestEnd(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	start := time.Date(2026, 11, 21, 21, 4, 55, 0, time.UTC)
	meta := Session{ID: "run-1", StartedAt: start, Command: []string{"bash", "-c", "exit 3"},
		PolicySHA256: "abc123", Image: "debian-12", Host: "builder", Sandbox: "agent-1"}
	w := beginT(t, s, meta)
	w.Append(Event{DNS: &DNS{QName: "a.example"}})
	before := time.Now()
	code := 3
	if err := w.End(&code); err != nil {
		t.Fatalf("End: %v", err)
	}
	code = 99 // End must have copied it

	sess, err := s.Session("run-1")
	if err != nil {
		t.Fatal(err)
	}
	if sess.EndedAt.IsZero() || sess.EndedAt.Before(before.Add(-time.Second)) {
		t.Errorf("EndedAt = %v", sess.EndedAt)
	}
	if sess.ExitCode == nil || *sess.ExitCode != 3 {
		t.Errorf("ExitCode = %v", sess.ExitCode)
	}
	if !sess.StartedAt.Equal(start) || sess.ID != "run-1" || strings.Join(sess.Command, " ") != "bash -c exit 3" ||
		sess.PolicySHA256 != "abc123" || sess.Image != "debian-12" || sess.Host != "builder" || sess.Sandbox != "agent-1" {
		t.Errorf("metadata not kept: %+v", sess)
	}
	if sess.Counts.Events != 1 || sess.Counts.Kinds[KindDNS] != 1 || sess.Counts.Lost != 0 {
		t.Errorf("counts %+v", sess.Counts)
	}
	if err := w.End(nil); err == nil {
		t.Error("second End succeeded")
	}

	// Appending after End is not recorded, and not silent either.
	w.Append(Event{DNS: &DNS{QName: "late.example"}})
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "after the session ended") {
		t.Errorf("Err after a late Append = %v", err)
	}
	if err := w.Sync(); err == nil {
		t.Error("Sync after a late Append reported no error")
	}
	if n := len(collect(t, s, "run-1")); n != 1 {
		t.Errorf("%d events, want 1", n)
	}

	// End with no exit code, and survival of a reopen.
	w2 := beginT(t, s, Session{ID: "run-2"})
	if err := w2.End(nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openT(t, dir)
	sess, err = s.Session("run-2")
	if err != nil {
		t.Fatal(err)
	}
	if sess.ExitCode != nil || sess.EndedAt.IsZero() {
		t.Errorf("run-2 after reopen: %+v", sess)
	}
}

func TestSessionsNewestFirst(t *testing.T) {
	s := openT(t, t.TempDir())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		id  string
		off time.Duration
	}{{"b", 2 * time.Hour}, {"a", 3 * time.Hour}, {"c", time.Hour}, {"d", 2 * time.Hour}} {
		w := beginT(t, s, Session{ID: c.id, StartedAt: base.Add(c.off)})
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
	}
	w := beginT(t, s, Session{}) // generated id, started now: newest
	if !regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{6}$`).MatchString(w.ID()) {
		t.Errorf("generated id %q", w.ID())
	}
	got, err := s.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sess := range got {
		ids = append(ids, sess.ID)
	}
	if want := w.ID() + " a d b c"; strings.Join(ids, " ") != want {
		t.Fatalf("order %q, want %q", strings.Join(ids, " "), want)
	}
	if !got[0].EndedAt.IsZero() {
		t.Errorf("running session has EndedAt %v", got[0].EndedAt)
	}
}

func TestBeginRefusesExistingAndBadIDs(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{ID: "x"})
	w.Append(Event{DNS: &DNS{QName: "one"}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(Session{ID: "x"}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("Begin with an existing id: %v", err)
	}
	for _, id := range []string{"a/b", "a b", "tab\t", strings.Repeat("x", 129), "é"} {
		if _, err := s.Begin(Session{ID: id}); err == nil {
			t.Errorf("Begin(%q) succeeded", id)
		}
	}
	// A session named like a prefix of another does not see its events.
	w2 := beginT(t, s, Session{ID: "x2"})
	w2.Append(Event{DNS: &DNS{QName: "two"}})
	if err := w2.End(nil); err != nil {
		t.Fatal(err)
	}
	if evs := collect(t, s, "x"); len(evs) != 1 || evs[0].DNS.QName != "one" {
		t.Fatalf("events of x: %+v", evs)
	}
	if err := s.Events("nope", func(Event) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Events of a missing session: %v", err)
	}
	if _, err := s.Session("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Session of a missing session: %v", err)
	}
}

func TestOpenInUse(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for _, open := range []func(string) (*Store, error){Open, OpenReadOnly} {
		s2, err := open(dir)
		if err == nil {
			s2.Close()
			t.Fatal("second Open of the same directory succeeded")
		}
		var iu *InUseError
		if !errors.Is(err, ErrInUse) || !errors.As(err, &iu) {
			t.Fatalf("second Open: %v (%T), want an InUseError", err, err)
		}
		if iu.PID != os.Getpid() || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
			t.Fatalf("second Open: %v (pid %d)", err, iu.PID)
		}
		if errors.Is(err, ErrCorrupt) {
			t.Fatal("in-use reported as corruption")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(dir) // released on Close
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s3.Close()
}

func TestCloseFlushesOpenWriters(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := beginT(t, s, Session{ID: "unended"})
	for i := range 5000 {
		w.Append(Event{Net: &Net{Port: uint16(i)}})
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Sessions(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sessions after Close: %v", err)
	}
	if err := w.End(nil); err == nil {
		t.Fatal("End after Close succeeded")
	}

	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	defer r.Close()
	evs := collect(t, r, "unended")
	if len(evs) != 5000 {
		t.Fatalf("%d events, want 5000", len(evs))
	}
	checkSeqs(t, evs, "unended")
	sess, err := r.Session("unended")
	if err != nil {
		t.Fatal(err)
	}
	if !sess.EndedAt.IsZero() || sess.Counts.Events != 5000 {
		t.Fatalf("session %+v", sess)
	}
	if _, err := r.Begin(Session{}); err == nil {
		t.Fatal("Begin on a read-only store succeeded")
	}
}

func TestOpenReadOnlyMissing(t *testing.T) {
	if _, err := OpenReadOnly(t.TempDir() + "/none"); err == nil {
		t.Fatal("OpenReadOnly of a missing directory succeeded")
	}
	dir := t.TempDir()
	if _, err := OpenReadOnly(dir); err == nil {
		t.Fatal("OpenReadOnly of an empty directory succeeded")
	}
}

// Values the store cannot decode, whatever put them there, produce a clear
// error naming the record, never a panic.
func TestGarbageInDB(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{ID: "g"})
	w.Append(Event{DNS: &DNS{QName: "fine"}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	put := func(k, v []byte) {
		t.Helper()
		if err := s.db.Set(k, v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		v    []byte
		want error
		msg  string
	}{
		{[]byte{99, 1, 2, 3, 4, 5, 6, 7, 8, 9}, ErrUnknownVersion, `session "g" event 2: unknown record version 99`},
		{[]byte("garbage that is long enough"), ErrUnknownVersion, "event 2"},
		{[]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0x0a, 0xff}, ErrCorrupt, "event 2"},
		{[]byte{}, ErrCorrupt, "event 2: corrupt record: empty value"},
	} {
		put(appendEventKey(nil, "g", 2), c.v)
		var seen []uint64
		err := s.Events("g", func(ev Event) error { seen = append(seen, ev.Seq); return nil })
		if err == nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("value %q: Events error %v, want %v mentioning %q", c.v, err, c.want, c.msg)
		}
		if len(seen) != 1 {
			t.Errorf("value %q: events before the bad one: %v", c.v, seen)
		}
	}
	put(append(eventKeyPrefix("g"), 1, 2, 3), appendEvent(nil, &Event{Kind: KindDNS}))
	if err := s.Events("g", func(Event) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short key: %v", err)
	}

	put(sessionKey("bad"), []byte{7, '{'})
	if _, err := s.Sessions(); !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("Sessions with a bad record: %v", err)
	}
	put(sessionKey("bad"), []byte{1, '{'})
	if _, err := s.Session("bad"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Session with a bad record: %v", err)
	}
}

func TestEventsCallbackError(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{})
	for range 10 {
		w.Append(Event{Net: &Net{}})
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	err := s.Events(w.ID(), func(Event) error {
		n++
		if n == 4 {
			return stop
		}
		return nil
	})
	if err != stop || n != 4 {
		t.Fatalf("err %v after %d events", err, n)
	}
}

// Several sessions written at once by one store keep their own sequences.
func TestConcurrentSessions(t *testing.T) {
	s := openT(t, t.TempDir())
	var ws []*Writer
	for range 3 {
		ws = append(ws, beginT(t, s, Session{}))
	}
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 * (i + 1) {
				w.Append(Event{DNS: &DNS{QName: w.ID()}})
			}
			if err := w.End(nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, w := range ws {
		evs := collect(t, s, w.ID())
		if len(evs) != 1000*(i+1) {
			t.Fatalf("session %d: %d events", i, len(evs))
		}
		checkSeqs(t, evs, w.ID())
		for _, ev := range evs {
			if ev.DNS.QName != w.ID() {
				t.Fatalf("session %s has an event of %s", w.ID(), ev.DNS.QName)
			}
		}
	}
}

// With a queue of a few events, appenders spend most of their time blocked
// on backpressure; none of their events may be lost.
func TestBackpressure(t *testing.T) {
	defer func(e, b int) { maxBatchEvents, maxBatchBytes = e, b }(maxBatchEvents, maxBatchBytes)
	maxBatchEvents, maxBatchBytes = 3, 200
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{})
	const G, N = 4, 500
	var wg sync.WaitGroup
	for g := range G {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range N {
				w.Append(Event{Net: &Net{Port: uint16(g), Count: int64(i), Detail: strings.Repeat("x", i%300)}})
			}
		}()
	}
	wg.Wait()
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, s, w.ID())
	if len(evs) != G*N {
		t.Fatalf("%d events, want %d", len(evs), G*N)
	}
	checkSeqs(t, evs, w.ID())
	next := make([]int64, G)
	for _, ev := range evs {
		g := ev.Net.Port
		if ev.Net.Count != next[g] || len(ev.Net.Detail) != int(next[g])%300 {
			t.Fatalf("seq %d: goroutine %d event %d, want %d", ev.Seq, g, ev.Net.Count, next[g])
		}
		next[g]++
	}
}

// TestModelCallEvents: Append infers the kind of a model call, the store
// reads it back whole, and the session counts it per kind without touching
// the allowed and denied decisions.
func TestModelCallEvents(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{ID: "mc"})
	mc := fullModelCall()
	w.Append(Event{ModelCall: mc})
	w.Append(Event{Kind: KindModelCall}) // a kind with no payload
	w.Append(Event{DNS: &DNS{QName: "api.anthropic.com", Decision: Allowed}})
	mc.Model = "changed after Append" // Append must have copied it
	mc.ToolCalls[0].Name = "changed"
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, s, "mc")
	checkSeqs(t, evs, "mc")
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	if evs[0].Kind != KindModelCall || !reflect.DeepEqual(evs[0].ModelCall, fullModelCall()) {
		t.Errorf("model call read back as %q %+v", evs[0].Kind, evs[0].ModelCall)
	}
	if evs[1].Kind != KindModelCall || !reflect.DeepEqual(evs[1].ModelCall, &ModelCall{}) {
		t.Errorf("bare model call read back as %q %+v", evs[1].Kind, evs[1].ModelCall)
	}
	sess, err := s.Session("mc")
	if err != nil {
		t.Fatal(err)
	}
	full := fullModelCall()
	want := Counts{Events: 3, Kinds: map[Kind]int64{KindModelCall: 2, KindDNS: 1}, Allowed: 1,
		InputTokens: full.InputTokens, OutputTokens: full.OutputTokens, CostUSD: full.CostUSD}
	sess.Counts.Bytes = 0 // TestBudget checks them
	if !reflect.DeepEqual(sess.Counts, want) {
		t.Errorf("counts %+v, want %+v", sess.Counts, want)
	}
}

// TestExecAndFSEvents: Append infers the kinds of exec and fs events, the
// store reads them back whole, and the session counts them per kind
// without touching the allowed and denied decisions.
func TestExecAndFSEvents(t *testing.T) {
	s := openT(t, t.TempDir())
	w := beginT(t, s, Session{ID: "run"})
	x := fullExec()
	w.Append(Event{Exec: x})
	w.Append(Event{FS: &FS{Action: FSCreated, Path: "out.txt", Size: 3}})
	w.Append(Event{FS: fullFS()})
	w.Append(Event{FS: &FS{Action: FSOverflow, Path: "."}})
	w.Append(Event{Kind: KindExec}) // a kind with no payload
	w.Append(Event{Exec: &Exec{Argv: []string{"false"}, ExitCode: 1}})
	x.Argv[0] = "changed after Append" // Append must have copied it
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, s, "run")
	checkSeqs(t, evs, "run")
	want := []Event{
		{Kind: KindExec, Exec: fullExec()},
		{Kind: KindFS, FS: &FS{Action: FSCreated, Path: "out.txt", Size: 3}},
		{Kind: KindFS, FS: fullFS()},
		{Kind: KindFS, FS: &FS{Action: FSOverflow, Path: "."}},
		{Kind: KindExec, Exec: &Exec{}},
		{Kind: KindExec, Exec: &Exec{Argv: []string{"false"}, ExitCode: 1}},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i := range evs {
		if evs[i].Time.IsZero() {
			t.Errorf("event %d has no time", i+1)
		}
		got := evs[i]
		got.Session, got.Seq, got.Time = "", 0, time.Time{}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("event %d read back as %+v (exec %+v, fs %+v), want %+v", i+1, got, got.Exec, got.FS, want[i])
		}
	}
	sess, err := s.Session("run")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := Counts{Events: 6, Kinds: map[Kind]int64{KindExec: 3, KindFS: 3}}
	sess.Counts.Bytes = 0 // TestBudget checks them
	if !reflect.DeepEqual(sess.Counts, wantCounts) {
		t.Errorf("counts %+v, want %+v", sess.Counts, wantCounts)
	}
}
