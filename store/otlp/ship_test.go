package otlp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/capsem/capsem/store"
)

// receiverAt runs the OpenTelemetry Collector's own OTLP receiver (HTTP
// only) on addr, delivering to sink.
func receiverAt(t testing.TB, addr string, sink *consumertest.LogsSink) receiver.Logs {
	t.Helper()
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	return r
}

// seqs are the capsem.seq attributes of every record sink received, in
// order, with the resource attributes of the first.
func seqs(sink *consumertest.LogsSink) ([]int64, map[string]any) {
	var out []int64
	var res map[string]any
	for _, ld := range sink.AllLogs() {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			if res == nil {
				res = rls.At(i).Resource().Attributes().AsRaw()
			}
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					v, _ := lrs.At(k).Attributes().Get("capsem.seq")
					out = append(out, v.Int())
				}
			}
		}
	}
	return out, res
}


// TestShipAcrossReceiverRestart: every event of a session reaches a real
// OTLP receiver once and in order, though the receiver is stopped for a
// while in the middle; the events appended meanwhile wait in the store.
func TestShipAcrossReceiverRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sink := new(consumertest.LogsSink)
	rcv := receiverAt(t, addr, sink)

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
		Behind: func(b bool, _ error) { mu.Lock(); behind = append(behind, b); mu.Unlock() }})
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
	rcv = receiverAt(t, addr, sink)
	defer rcv.Shutdown(context.Background())
	appendN(3000, 500)
	unsent, err := sh.Close(30 * time.Second)
	if err != nil || unsent != 0 {
		t.Fatalf("Close: %d unsent, %v", unsent, err)
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}

	got, res := seqs(sink)
	want := int(w.Seq())
	if len(got) != want {
		t.Errorf("the receiver got %d records, the session has %d events", len(got), want)
	}
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("record %d has seq %d: lost, repeated or out of order (%v…)", i, s, got[max(0, i-3):min(len(got), i+3)])
		}
	}
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
	for _, ld := range sink.AllLogs() {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			lrs := rls.At(i).ScopeLogs().At(0).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				var ev store.Event
				if err := json.Unmarshal([]byte(lrs.At(k).Body().Str()), &ev); err != nil {
					t.Fatalf("body is not an event: %v", err)
				}
				if ev.Recording != nil {
					kinds[ev.Recording.State]++
				}
			}
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
