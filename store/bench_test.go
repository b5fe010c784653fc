package store

import (
	"net/netip"
	"testing"
	"time"
)

// benchEvents are typical records: a denied DNS query, a refused direct-IP
// flow, and an HTTPS request with a few headers and short body previews.
func benchEvents() []Event {
	return []Event{
		{DNS: &DNS{QName: "telemetry.example.com", QType: "A", Transport: TransportUDP, Decision: Denied,
			Reason: "name not allowed", Answer: "NXDOMAIN", ResolverAsked: netip.MustParseAddr("198.18.0.1")}},
		{Net: &Net{IP: netip.MustParseAddr("1.1.1.1"), Port: 443, SrcIP: netip.MustParseAddr("198.18.0.2"), SrcPort: 40312,
			Transport: TransportTCP, Decision: Denied, Reason: "direct IP", Count: 1}},
		{Net: &Net{Domain: "api.anthropic.com", IP: netip.MustParseAddr("198.19.0.7"), Port: 443,
			SrcIP: netip.MustParseAddr("198.18.0.2"), SrcPort: 51234, Transport: TransportTCP, ConnType: ConnHTTPS,
			Decision: Allowed, MatchedRule: "allow api.anthropic.com", Method: "POST", Path: "/v1/messages",
			StatusCode: 200, BytesSent: 2345, BytesReceived: 18231, Duration: 812 * time.Millisecond,
			RequestHeaders:      []Header{{"Content-Type", "application/json"}, {"Anthropic-Version", "2023-06-01"}, {"User-Agent", "claude-cli/1.0"}},
			ResponseHeaders:     []Header{{"Content-Type", "text/event-stream"}, {"Request-Id", "req_011CUXYZ"}},
			RequestBodyPreview:  `{"model":"claude-sonnet-4","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`,
			ResponseBodyPreview: "event: message_start\ndata: {\"type\":\"message_start\"}"}},
	}
}

func benchSize(evs []Event) int64 {
	var n int
	for i := range evs {
		n += len(appendEvent(nil, &evs[i]))
	}
	return int64(n / len(evs))
}

// BenchmarkAppend appends from one goroutine; the timed region ends with a
// Sync, so events/s counts durable events.
func BenchmarkAppend(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.Begin(Session{})
	if err != nil {
		b.Fatal(err)
	}
	evs := benchEvents()
	b.SetBytes(benchSize(evs))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		w.Append(evs[i%len(evs)])
	}
	if err := w.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.StopTimer()
	if err := w.End(nil); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppendParallel appends from GOMAXPROCS goroutines (more with
// -cpu or SetParallelism), as the netstack and the proxy do.
func BenchmarkAppendParallel(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.Begin(Session{})
	if err != nil {
		b.Fatal(err)
	}
	evs := benchEvents()
	b.SetBytes(benchSize(evs))
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			w.Append(evs[i%len(evs)])
			i++
		}
	})
	if err := w.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.StopTimer()
	if err := w.End(nil); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEvents reads a session back, as the SQLite export does.
func BenchmarkEvents(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.Begin(Session{})
	if err != nil {
		b.Fatal(err)
	}
	evs := benchEvents()
	const n = 100_000
	for i := range n {
		w.Append(evs[i%len(evs)])
	}
	if err := w.End(nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		got := 0
		if err := s.Events(w.ID(), func(Event) error { got++; return nil }); err != nil {
			b.Fatal(err)
		}
		if got != n {
			b.Fatalf("read %d events, want %d", got, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
}
