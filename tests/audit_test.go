package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp/otlptest"
)

// TestAuditOTLP: capsem-net --audit-otlp streams every event of a session
// produced by real clients in the namespace to the Collector's OTLP
// receiver, in order, named by its resource attributes; the receiver is
// stopped and started again in the middle.
func TestAuditOTLP(t *testing.T) {
	addr := otlptest.FreeAddr(t)
	sink := new(consumertest.LogsSink)
	rcv := otlptest.Start(t, addr, sink)
	e, echo := startBasic(t, envOptions{extraArgs: []string{"--audit-otlp", "http://" + addr}}, "")
	e.digA("allowed.test")
	e.digStatus("denied.test")
	if err := rcv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.connect("203.0.113.10", 443)
	e.echoRoundTrip(echo, "echo.test", 8080, 10000)
	time.Sleep(time.Second) // the stream retries against nothing
	rcv = otlptest.Start(t, addr, sink)
	defer rcv.Shutdown(context.Background())
	evs := e.stop()

	recs := otlptest.Records(sink)
	if len(recs) != len(evs) || len(evs) < 5 {
		t.Fatalf("the receiver got %d records; the session has %d events:\n%s", len(recs), len(evs), dumpEvents(evs))
	}
	for i, r := range recs {
		ev := evs[i]
		if r.Attrs["capsem.seq"] != int64(ev.Seq) || r.Attrs["capsem.kind"] != string(ev.Kind) || r.Event != "capsem."+string(ev.Kind) {
			t.Errorf("record %d: %v %s, want seq %d kind %s", i, r.Attrs, r.Event, ev.Seq, ev.Kind)
		}
		if r.Resource["service.name"] != "capsem" || r.Resource["capsem.session"] != ev.Session {
			t.Errorf("record %d: resource %v", i, r.Resource)
		}
	}
	denied := 0
	for _, r := range recs {
		if r.Attrs["capsem.decision"] == string(store.Denied) {
			denied++
		}
	}
	if denied < 2 {
		t.Errorf("%d denied records, want the denied name and the direct IP", denied)
	}
}

// TestAuditRequired: with --audit-required and the collector down, once
// the stream is --audit-backlog events behind, new flows and DNS answers
// are refused (store-unavailable), and the record says why; when the
// collector comes up, the stream catches up and answers are given again.
func TestAuditRequired(t *testing.T) {
	addr := otlptest.FreeAddr(t)
	e, _ := startBasic(t, envOptions{extraArgs: []string{"--audit-otlp", "http://" + addr, "--audit-required", "--audit-backlog", "3"}}, "")
	answered := func() bool {
		out, _ := e.run(10*time.Second, "dig", "+short", "+time=2", "+tries=1", "allowed.test")
		return synthetic.MatchString(out)
	}
	refused := false
	for i := 0; i < 20 && !refused; i++ {
		refused = !answered()
		time.Sleep(100 * time.Millisecond)
	}
	if !refused {
		t.Fatal("DNS answers still given with the audit stream 20 queries behind")
	}
	sink := new(consumertest.LogsSink)
	rcv := otlptest.Start(t, addr, sink)
	defer rcv.Shutdown(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for !answered() {
		if time.Now().After(deadline) {
			t.Fatal("DNS answers still refused 30 s after the collector came up")
		}
		time.Sleep(200 * time.Millisecond)
	}
	evs := e.stop()
	if got := len(otlptest.Records(sink)); got != len(evs) {
		t.Errorf("the collector got %d records of the session's %d events", got, len(evs))
	}
	if n := dnsEvent(evs, func(d *store.DNS) bool { return d.Reason == "store-unavailable" }); n == nil {
		t.Errorf("no DNS event refused store-unavailable:\n%s", dumpEvents(evs))
	}
	states := map[string]int{}
	for _, ev := range evs {
		if ev.Recording != nil && strings.Contains(ev.Recording.Detail, "audit stream") {
			states[ev.Recording.State]++
		}
	}
	if states[store.RecordingAuditBehind] != 1 || states[store.RecordingAuditResumed] != 1 {
		t.Errorf("recording events %v, want one audit-behind and one audit-resumed:\n%s", states, dumpEvents(evs))
	}
}
