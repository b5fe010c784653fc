package mcpscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/capsem/capsem/mitm/internal/sse"
)

// FuzzMCPStream feeds arbitrary bytes, cut arbitrarily, to Body, Stream and
// EventSplitter: no panic, the same messages however the input is cut,
// every cap kept, the splitter's output the input exactly, and its whole
// events read as package sse reads the stream.
func FuzzMCPStream(f *testing.F) {
	for _, s := range []string{
		toolsCall,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`,
		`{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope"}}`,
		"event: endpoint\ndata: /messages?s=1\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":2,\"result\":{\"tools\":[{\"name\":\"t\"}]}}\r\n\r\n",
		"data: a\r\rdata: b\r",
		`{"model":"gpt-4o","messages":[]}`,
	} {
		f.Add([]byte(s), uint16(5), uint16(17), uint8(40))
	}
	f.Fuzz(func(t *testing.T, in []byte, c1, c2 uint16, capByte uint8) {
		i := int(c1) % (len(in) + 1)
		j := i + int(c2)%(len(in)-i+1)
		cuts := [][][]byte{{in}, {in[:i], in[i:j], in[j:]}}
		var ones [][]byte
		for k := range in {
			ones = append(ones, in[k:k+1])
		}
		cuts = append(cuts, ones)

		const preview = 48
		check := func(m Message) {
			if len(m.Preview) > preview || len(m.ErrorMessage) > preview || len(m.ID) > MaxIDBytes ||
				len(m.Method) > MaxMethodBytes || len(m.Tool) > MaxToolBytes || len(m.ToolNames) > MaxToolNames {
				t.Fatalf("over a cap: %+v", m)
			}
			for _, n := range m.ToolNames {
				if len(n) > MaxToolBytes {
					t.Fatalf("tool name of %d bytes", len(n))
				}
			}
			if m.Bytes <= 0 || m.Bytes > int64(len(in)) {
				t.Fatalf("Bytes %d of %d", m.Bytes, len(in))
			}
			if (m.ID == "") != (m.Kind == Notification) && m.Kind != Response && m.Kind != Error {
				t.Fatalf("id %q for a %v", m.ID, m.Kind)
			}
			if m.ID != "" && !json.Valid([]byte(m.ID)) {
				t.Fatalf("id %q is not JSON", m.ID)
			}
			if !json.Valid(ErrorResponse(m.ID, m.ErrorCode, m.ErrorMessage)) {
				t.Fatalf("error response to %q is not JSON", m.ID)
			}
		}
		run := func(pieces [][]byte) string {
			var log strings.Builder
			b := NewBody(preview, func(m Message) { check(m); fmt.Fprintf(&log, "body %+v\n", m) })
			s := NewStream(preview, func(m Message) { check(m); fmt.Fprintf(&log, "stream %+v\n", m) },
				func(u string) { fmt.Fprintf(&log, "endpoint %q\n", u) })
			for _, p := range pieces {
				b.Write(p)
				s.Write(p)
			}
			b.Close()
			s.Close()
			fmt.Fprintf(&log, "%v %v\n", b.JSONRPC(), s.JSONRPC())
			return log.String()
		}
		whole := run(cuts[0])
		for _, pieces := range cuts[1:] {
			if got := run(pieces); got != whole {
				t.Fatalf("cut into %d pieces:\n%s\nwhole:\n%s", len(pieces), got, whole)
			}
		}

		// The splitter: output == input whatever the cuts; whole events
		// within the cap and read as package sse reads them.
		max := 1 + int(capByte)
		var sseEvents, splitEvents []string
		p := sse.NewParser(1<<20, func(ev sse.Event) { sseEvents = append(sseEvents, ev.Type+"|"+ev.Data) })
		p.Write(in)
		for n, pieces := range cuts {
			var out bytes.Buffer
			var events []string
			e := NewEventSplitter(max, func(raw []byte, complete bool) {
				if len(raw) == 0 {
					t.Fatal("an empty piece")
				}
				if complete {
					if len(raw) > max {
						t.Fatalf("a whole event of %d bytes over the cap %d", len(raw), max)
					}
					ev, data := EventData(raw)
					if data != nil {
						if ev == "" {
							ev = "message"
						}
						events = append(events, ev+"|"+string(data))
					}
				}
				out.Write(raw)
			})
			for _, p := range pieces {
				e.Write(p)
			}
			e.Close()
			if !bytes.Equal(out.Bytes(), in) {
				t.Fatalf("cut into %d pieces: the splitter gave %q for %q", len(pieces), out.Bytes(), in)
			}
			// With no event over the cap and no byte-order mark past the
			// start, the whole events are exactly the events sse reads.
			if n == 0 {
				splitEvents = events
			}
		}
		if len(in) <= max && !bytes.Contains(bytes.TrimPrefix(in, bom), bom) && !bytes.Contains(in, []byte{0}) {
			if strings.Join(splitEvents, "\x00") != strings.Join(sseEvents, "\x00") {
				t.Fatalf("splitter events %q, sse events %q", splitEvents, sseEvents)
			}
		}

		// FilterTools never panics, and what it returns is JSON.
		if out, _, ok := FilterTools(in, func(n string) bool { return len(n)%2 == 0 }); ok && !json.Valid(out) {
			t.Fatalf("FilterTools gave invalid JSON %q", out)
		}
	})
}
