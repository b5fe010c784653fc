package main

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/capsem/capsem/store"
)

// fill writes a store at dir: small sessions of a few hundred events, then
// the big one last (so it is the newest) with events events cycling
// through the kinds a real agent session has.
func fill(dir string, events, small int) (big string, err error) {
	st, err := store.Open(dir)
	if err != nil {
		return "", err
	}
	defer st.Close()
	for i := 0; i < small; i++ {
		if _, err := session(st, 300, []string{"sh", "-c", fmt.Sprintf("small session %d", i)}); err != nil {
			return "", err
		}
	}
	return session(st, events, []string{"claude", "-p", "the big session"})
}

func session(st *store.Store, n int, argv []string) (string, error) {
	w, err := st.Begin(store.Session{Command: argv})
	if err != nil {
		return "", err
	}
	ip := netip.MustParseAddr("198.19.0.5")
	for i := 0; i < n; i++ {
		var ev store.Event
		host := fmt.Sprintf("host%d.example", i%40)
		switch i % 8 {
		case 0:
			ev.DNS = &store.DNS{QName: host, QType: "A", Decision: store.Allowed, Answer: ip.String()}
		case 1:
			ev.Net = &store.Net{Domain: host, IP: ip, Port: 443, Transport: store.TransportTCP, ConnType: store.ConnHTTPS, Decision: store.Allowed, BytesSent: 900, BytesReceived: 12000}
		case 2, 3:
			ev.Net = &store.Net{Domain: host, IP: ip, Port: 443, Transport: store.TransportTCP, Method: "GET", Path: fmt.Sprintf("/v1/item/%d", i), StatusCode: 200, Decision: store.Allowed, HTTPVersion: store.HTTP2}
		case 4:
			ev.ModelCall = &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-opus-5-5", InputTokens: 1200, OutputTokens: 80, CostUSD: 0.004,
				TextContent: "I will look at the file.", ToolCalls: []store.ToolCall{{CallID: fmt.Sprintf("toolu_%d", i), Name: "Read", Arguments: `{"path":"src/main.go"}`, Origin: "native"}}}
		case 5:
			ev.FS = &store.FS{Action: store.FSModified, Path: fmt.Sprintf("src/file%d.go", i%500), Size: 4096}
		case 6:
			ev.Net = &store.Net{IP: netip.MustParseAddr("1.1.1.1"), Port: 443, Transport: store.TransportTCP, Decision: store.Denied, Reason: "direct-ip"}
		case 7:
			ev.Exec = &store.Exec{Argv: []string{"go", "test", "./..."}, Duration: 2 * time.Second}
		}
		w.Append(ev)
	}
	if err := w.End(new(int)); err != nil {
		return "", err
	}
	return w.ID(), nil
}
