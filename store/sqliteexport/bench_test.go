package sqliteexport

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// typicalEvents are the records of a busy session: a denied DNS query, an
// allowed one, a refused direct-IP flow, and an HTTPS request with headers
// and short body previews.
func typicalEvents() []store.Event {
	guest := netip.MustParseAddr("198.18.0.2")
	gw := netip.MustParseAddr("198.18.0.1")
	return []store.Event{
		{DNS: &store.DNS{QName: "telemetry.example.com", QType: "A", Transport: store.TransportUDP, Decision: store.Denied,
			Reason: "name not allowed", Answer: "NXDOMAIN", ResolverAsked: gw}},
		{DNS: &store.DNS{QName: "api.anthropic.com", QType: "A", Transport: store.TransportUDP, Decision: store.Allowed,
			MatchedRule: "api.anthropic.com", Answer: "198.19.0.7", ResolverAsked: gw}},
		{Net: &store.Net{IP: netip.MustParseAddr("1.1.1.1"), Port: 443, SrcIP: guest, SrcPort: 40312,
			Transport: store.TransportTCP, Decision: store.Denied, Reason: "direct IP", Count: 3}},
		{Net: &store.Net{Domain: "api.anthropic.com", IP: netip.MustParseAddr("198.19.0.7"), Port: 443,
			SrcIP: guest, SrcPort: 51234, Transport: store.TransportTCP, ConnType: store.ConnHTTPS,
			Decision: store.Allowed, MatchedRule: "api.anthropic.com", Method: "POST", Path: "/v1/messages",
			StatusCode: 200, BytesSent: 2345, BytesReceived: 18231, Duration: 812 * time.Millisecond,
			RequestHeaders:      []store.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Anthropic-Version", Value: "2023-06-01"}, {Name: "User-Agent", Value: "claude-cli/1.0"}},
			ResponseHeaders:     []store.Header{{Name: "Content-Type", Value: "text/event-stream"}, {Name: "Request-Id", Value: "req_011CUXYZ"}},
			RequestBodyPreview:  `{"model":"claude-sonnet-4","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`,
			ResponseBodyPreview: "event: message_start\ndata: {\"type\":\"message_start\"}"}},
	}
}

// fillStore opens a store in a temporary directory and writes sessions
// sessions of perSession typical events each. The caller closes it.
func fillStore(tb testing.TB, sessions, perSession int) *store.Store {
	tb.Helper()
	st, err := store.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	evs := typicalEvents()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for s := range sessions {
		w, err := st.Begin(store.Session{ID: fmt.Sprintf("bench-%03d", s), StartedAt: t0.Add(time.Duration(s) * time.Hour),
			Command: []string{"claude", "-p", "hello"}, Image: "default", Host: "bench"})
		if err != nil {
			tb.Fatal(err)
		}
		for i := range perSession {
			ev := evs[i%len(evs)]
			ev.Time = t0.Add(time.Duration(s)*time.Hour + time.Duration(i)*time.Microsecond)
			w.Append(ev)
		}
		code := 0
		if err := w.End(&code); err != nil {
			tb.Fatal(err)
		}
	}
	return st
}

// BenchmarkExport1M exports a store of 1M events (4 sessions of 250k) and
// reports events/s. Building the store takes a while; run it with
// -benchtime=1x:
//
//	go test ./store/sqliteexport -run '^$' -bench Export1M -benchtime=1x
func BenchmarkExport1M(b *testing.B) { benchExport(b, 4, 250_000, false) }

// BenchmarkExport100k is the quick version, with and without scrubbing.
func BenchmarkExport100k(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchExport(b, 4, 25_000, false) })
	b.Run("scrub", func(b *testing.B) { benchExport(b, 4, 25_000, true) })
}

func benchExport(b *testing.B, sessions, perSession int, scrub bool) {
	st := fillStore(b, sessions, perSession)
	defer st.Close()
	dir := b.TempDir()
	n := sessions * perSession
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		res, err := Export(context.Background(), st, filepath.Join(dir, fmt.Sprintf("out-%d.db", i)), Options{Scrub: scrub})
		if err != nil {
			b.Fatal(err)
		}
		if res.Events != n {
			b.Fatalf("exported %d events, want %d", res.Events, n)
		}
		total += res.Duration
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
	b.ReportMetric(total.Seconds()/float64(b.N), "s/export")
}
