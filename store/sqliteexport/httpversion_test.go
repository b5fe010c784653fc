package sqliteexport

import (
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// TestHTTPVersion: a request row carries the HTTP version the guest spoke;
// a flow, and a request recorded before the version was kept, have NULL.
func TestHTTPVersion(t *testing.T) {
	cases := []struct {
		why  string
		ev   store.Net
		want any
	}{
		{"an HTTP/1.1 request", store.Net{HTTPVersion: store.HTTP11, Method: "GET", Path: "/a", ConnType: store.ConnHTTPS}, "HTTP/1.1"},
		{"an HTTP/2 request", store.Net{HTTPVersion: store.HTTP2, Method: "GET", Path: "/b", ConnType: store.ConnHTTPS}, "HTTP/2"},
		{"an HTTP/3 request, over QUIC", store.Net{HTTPVersion: store.HTTP3, Method: "GET", Path: "/c", ConnType: store.ConnHTTPS, Transport: store.TransportUDP}, "HTTP/3"},
		{"an HTTP/1.0 client's request", store.Net{HTTPVersion: store.HTTP10, Method: "GET", Path: "/d", ConnType: store.ConnHTTPS}, "HTTP/1.0"},
		{"a flow has no HTTP version", store.Net{ConnType: store.ConnTLS, Transport: store.TransportTCP, BytesSent: 5}, nil},
		{"a request recorded before the version was kept", store.Net{Method: "GET", Path: "/e", ConnType: store.ConnHTTPS}, nil},
	}
	var events []store.Event
	for i, c := range cases {
		events = append(events, store.Event{Time: t0.Add(time.Duration(i+1) * time.Millisecond), Net: &c.ev})
	}
	st := storeWith(t, events)
	out, _ := export(t, st, Options{})
	rows := queryRows(t, openExport(t, out), "SELECT http_version FROM net_events ORDER BY id")
	if len(rows) != len(cases) {
		t.Fatalf("%d rows, want %d", len(rows), len(cases))
	}
	for i, c := range cases {
		if got := rows[i]["http_version"]; got != c.want {
			t.Errorf("%s: http_version = %#v, want %#v", c.why, got, c.want)
		}
	}
}
