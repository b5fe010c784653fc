package otlp

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp/otlptest"
)

// TestShipAcrossReceiverRestart: every event of a session reaches a real
// OTLP receiver once and in order, though the receiver is stopped for a
// while in the middle; the events appended meanwhile wait in the store.
func TestShipAcrossReceiverRestart(t *testing.T) {
	addr := otlptest.FreeAddr(t)
	sink := new(consumertest.LogsSink)
	rcv := otlptest.Start(t, addr, sink)

	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Begin(store.Session{Sandbox: "box", Host: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var behind []bool
	sh, err := Start(st, w, Config{URL: "http://" + addr, Poll: 20 * time.Millisecond, Backlog: 1500,
		Resource: map[string]string{"capsem.session": w.ID(), "capsem.sandbox": "box", "host.name": "builder"},
		Behind:   func(b bool, _ error) { mu.Lock(); behind = append(behind, b); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			w.Append(store.Event{DNS: &store.DNS{QName: fmt.Sprintf("q%d.test", i), Decision: store.Denied, Reason: "not allowed"}})
		}
		w.Sync()
	}
	appendN(0, 1000)
	waitFor(t, func() bool { return sh.Sent() >= 1000 }, "the first 1000 events sent")

	// The receiver goes away; 2000 more events are appended (past the
	// backlog bound), then it comes back on the same address.
	if err := rcv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendN(1000, 2000)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(behind) > 0 }, "the stream said it fell behind")
	time.Sleep(300 * time.Millisecond)
	rcv = otlptest.Start(t, addr, sink)
	defer rcv.Shutdown(context.Background())
	appendN(3000, 500)
	unsent, err := sh.Close(30 * time.Second)
	if err != nil || unsent != 0 {
		t.Fatalf("Close: %d unsent, %v", unsent, err)
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}

	recs := otlptest.Records(sink)
	want := int(w.Seq())
	if len(recs) != want {
		t.Errorf("the receiver got %d records, the session has %d events", len(recs), want)
	}
	for i, r := range recs {
		if r.Attrs["capsem.seq"] != int64(i+1) {
			t.Fatalf("record %d has seq %v: lost, repeated or out of order", i, r.Attrs["capsem.seq"])
		}
	}
	res := recs[0].Resource
	if res["service.name"] != "capsem" || res["capsem.sandbox"] != "box" || res["capsem.session"] != w.ID() || res["host.name"] != "builder" {
		t.Errorf("resource attributes %v", res)
	}
	mu.Lock()
	if len(behind) != 2 || !behind[0] || behind[1] {
		t.Errorf("Behind calls %v, want [true false]", behind)
	}
	mu.Unlock()
	// The stream says so in the record too, and the body is the event.
	var kinds = map[string]int{}
	for _, r := range recs {
		var ev store.Event
		if err := json.Unmarshal([]byte(r.Body), &ev); err != nil {
			t.Fatalf("body is not an event: %v", err)
		}
		if ev.Recording != nil {
			kinds[ev.Recording.State]++
		}
	}
	if kinds[store.RecordingAuditBehind] != 1 || kinds[store.RecordingAuditResumed] != 1 {
		t.Errorf("recording events in the stream: %v, want one audit-behind and one audit-resumed", kinds)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
