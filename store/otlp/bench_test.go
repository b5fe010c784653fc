package otlp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp/otlptest"
)

// BenchmarkAppend is store's BenchmarkAppend (one denied DNS event,
// timed until Sync) without a stream ("plain") and with the session
// streamed to a real OTLP receiver ("streamed": the Collector's, on
// loopback in this process, into a sink that drops): what streaming
// costs the writer (events/s), and how fast the stream delivers
// (delivered/s, timed until the receiver has every event).
func BenchmarkAppend(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchAppend(b, false) })
	b.Run("streamed", func(b *testing.B) { benchAppend(b, true) })
}

func benchAppend(b *testing.B, streamed bool) {
	st, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	w, err := st.Begin(store.Session{})
	if err != nil {
		b.Fatal(err)
	}
	var sh *Shipper
	if streamed {
		addr := otlptest.FreeAddr(b)
		rcv := otlptest.Start(b, addr, new(consumertest.LogsSink))
		defer rcv.Shutdown(context.Background())
		if sh, err = Start(st, w, Config{URL: "http://" + addr, Poll: 10 * time.Millisecond, Backlog: 1 << 40}); err != nil {
			b.Fatal(err)
		}
	}
	ev := store.Event{DNS: &store.DNS{QName: "telemetry.example.com", QType: "A", Transport: store.TransportUDP, Decision: store.Denied,
		Reason: "name not allowed", Answer: "NXDOMAIN"}}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		w.Append(ev)
	}
	if err := w.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	if sh != nil {
		if unsent, err := sh.Close(5 * time.Minute); err != nil || unsent != 0 {
			b.Fatal(fmt.Sprint(unsent, err))
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "delivered/s")
	}
	b.StopTimer()
	w.End(nil)
}
