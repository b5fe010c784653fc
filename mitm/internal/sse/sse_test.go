package sse

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

func parseAll(max int, chunks ...[]byte) []Event {
	var evs []Event
	p := NewParser(max, func(e Event) { evs = append(evs, e) })
	for _, c := range chunks {
		if n, err := p.Write(c); n != len(c) || err != nil {
			panic("Write did not accept all its input")
		}
	}
	p.Close()
	return evs
}

func parseBytewise(max int, in []byte) []Event {
	chunks := make([][]byte, len(in))
	for i := range in {
		chunks[i] = in[i : i+1]
	}
	return parseAll(max, chunks...)
}

// reference is a direct, whole-input reading of the standard's algorithm,
// with no limits, used to check the incremental parser.
func reference(in []byte) []Event {
	s := string(in)
	s = strings.TrimPrefix(s, "\uFEFF")
	var lines []string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break // an unterminated last line is never processed
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	var evs []Event
	var data strings.Builder
	evType, lastID := "", ""
	for _, l := range lines {
		if l == "" {
			if data.Len() == 0 {
				evType = ""
				continue
			}
			d := strings.TrimSuffix(data.String(), "\n")
			t := evType
			if t == "" {
				t = "message"
			}
			evs = append(evs, Event{Type: t, Data: d, ID: lastID})
			data.Reset()
			evType = ""
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value := l, ""
		if c := strings.IndexByte(l, ':'); c >= 0 {
			field, value = l[:c], strings.TrimPrefix(l[c+1:], " ")
		}
		switch field {
		case "event":
			evType = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		}
	}
	return evs
}

func TestParser(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"simple", "data: hello\n\n", []Event{{Type: "message", Data: "hello"}}},
		{"no space after colon", "data:hello\n\n", []Event{{Type: "message", Data: "hello"}}},
		{"only one space removed", "data:  two\n\n", []Event{{Type: "message", Data: " two"}}},
		{"multi-line data", "data: a\ndata: b\ndata\n\n", []Event{{Type: "message", Data: "a\nb\n"}}},
		{"event type", "event: ping\ndata: {}\n\n", []Event{{Type: "ping", Data: "{}"}}},
		{"empty event type means message", "event:\ndata: x\n\n", []Event{{Type: "message", Data: "x"}}},
		{"event type resets", "event: a\ndata: 1\n\ndata: 2\n\n",
			[]Event{{Type: "a", Data: "1"}, {Type: "message", Data: "2"}}},
		{"type without data is not dispatched and resets", "event: a\n\ndata: 2\n\n",
			[]Event{{Type: "message", Data: "2"}}},
		{"empty data is dispatched", "data\n\ndata:\n\n", []Event{{Type: "message"}, {Type: "message"}}},
		{"comments ignored", ": hi\n:\ndata: x\n: mid\n\n", []Event{{Type: "message", Data: "x"}}},
		{"CRLF", "event: e\r\ndata: x\r\n\r\n", []Event{{Type: "e", Data: "x"}}},
		{"CR only", "data: a\rdata: b\r\rdata: c\r\r",
			[]Event{{Type: "message", Data: "a\nb"}, {Type: "message", Data: "c"}}},
		{"mixed endings", "data: a\r\ndata: b\n\r\ndata: c\r\n\n",
			[]Event{{Type: "message", Data: "a\nb"}, {Type: "message", Data: "c"}}},
		{"LF CR is two line ends", "data: a\n\rdata: b\n\n",
			[]Event{{Type: "message", Data: "a"}, {Type: "message", Data: "b"}}},
		{"BOM stripped", "\uFEFFdata: x\n\n", []Event{{Type: "message", Data: "x"}}},
		{"second BOM kept", "\uFEFF\uFEFFdata: x\n\ndata: y\n\n",
			[]Event{{Type: "message", Data: "y"}}}, // "\uFEFFdata" is an unknown field
		{"partial BOM is content", "\xEF\xBBdata: x\n\n", nil},
		{"id persists", "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
			[]Event{{Type: "message", Data: "a", ID: "1"}, {Type: "message", Data: "b", ID: "1"}, {Type: "message", Data: "c"}}},
		{"id with NUL ignored", "id: 1\nid: a\x00b\ndata: x\n\n", []Event{{Type: "message", Data: "x", ID: "1"}}},
		{"id set without data", "id: 7\n\ndata: x\n\n", []Event{{Type: "message", Data: "x", ID: "7"}}},
		{"unknown fields ignored", "foo: bar\ndata: x\nDATA: y\n\n", []Event{{Type: "message", Data: "x"}}},
		{"colon in value", "data: a: b\n\n", []Event{{Type: "message", Data: "a: b"}}},
		{"unterminated event discarded", "data: a\n\ndata: b\n", []Event{{Type: "message", Data: "a"}}},
		{"unterminated line discarded", "data: a\n\ndata: b", []Event{{Type: "message", Data: "a"}}},
		{"openai done", "data: {\"x\":1}\n\ndata: [DONE]\n\n",
			[]Event{{Type: "message", Data: `{"x":1}`}, {Type: "message", Data: "[DONE]"}}},
		{"empty input", "", nil},
		{"only blank lines", "\n\n\r\n\r", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if got := parseAll(0, in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("one write:\n got %#v\nwant %#v", got, tt.want)
			}
			if got := parseBytewise(0, in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("byte by byte:\n got %#v\nwant %#v", got, tt.want)
			}
			for i := 0; i <= len(in); i++ {
				if got := parseAll(0, in[:i], in[i:]); !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("split at %d:\n got %#v\nwant %#v", i, got, tt.want)
				}
			}
			if got := reference(in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("reference disagrees with the test: %#v", got)
			}
		})
	}
}

func TestCRLFSplitAcrossWrites(t *testing.T) {
	got := parseAll(0, []byte("data: a\r"), []byte("\ndata: b\r"), []byte("\n\r"), []byte("\n"))
	want := []Event{{Type: "message", Data: "a\nb"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v want %#v", got, want)
	}
	// An empty write between CR and LF must not lose the pairing.
	got = parseAll(0, []byte("data: a\r"), nil, []byte("\n\r"), []byte{}, []byte("\n"))
	if !reflect.DeepEqual(got, []Event{{Type: "message", Data: "a"}}) {
		t.Fatalf("got %#v", got)
	}
}

func TestRetry(t *testing.T) {
	p := NewParser(0, nil)
	if p.Retry() != -1 {
		t.Fatal("retry set before any field")
	}
	p.Write([]byte("retry: 1500\n\nretry: 12x\nretry:\n\n"))
	if p.Retry() != 1500 {
		t.Fatalf("retry = %d", p.Retry())
	}
	p.Write([]byte("retry: 999999999999999999999\n"))
	if p.Retry() != 1500 {
		t.Fatalf("an over-long retry value changed the retry: %d", p.Retry())
	}
}

func TestTruncation(t *testing.T) {
	const max = 100
	big := strings.Repeat("x", 10*max)
	in := []byte("event: " + big + "\nid: " + big + "\ndata: " + big + "\ndata: more\n\ndata: small\n\n")
	for name, evs := range map[string][]Event{
		"one write":    parseAll(max, in),
		"byte by byte": parseBytewise(max, in),
	} {
		if len(evs) != 2 {
			t.Fatalf("%s: %d events, want 2", name, len(evs))
		}
		e := evs[0]
		if !e.Truncated || len(e.Data) != max || len(e.Type) != max || len(e.ID) != max {
			t.Errorf("%s: truncated=%v data=%d type=%d id=%d, want all %d", name, e.Truncated, len(e.Data), len(e.Type), len(e.ID), max)
		}
		if e := evs[1]; e.Truncated || e.Data != "small" || len(e.ID) != max {
			t.Errorf("%s: the next event is not clean: %+v", name, e)
		}
	}
	// Exactly at the limit is not truncated.
	evs := parseAll(max, []byte("data: "+strings.Repeat("y", max)+"\n\n"))
	if len(evs) != 1 || evs[0].Truncated || len(evs[0].Data) != max {
		t.Fatalf("an event of exactly the limit: %+v", evs)
	}
}

func TestMemoryBounded(t *testing.T) {
	const max = 1024
	p := NewParser(max, func(Event) { t.Fatal("no event expected") })
	chunk := bytes.Repeat([]byte("z"), 64<<10)
	p.Write([]byte("data: "))
	for i := 0; i < 256; i++ { // 16 MiB of one line
		p.Write(chunk)
	}
	if cap(p.line) > 4*max || cap(p.data) > 4*max {
		t.Fatalf("line buffer %d, data buffer %d bytes for a limit of %d", cap(p.line), cap(p.data), max)
	}
}

func TestCloseDiscardsAndIgnores(t *testing.T) {
	n := 0
	p := NewParser(0, func(Event) { n++ })
	p.Write([]byte("data: a\n"))
	p.Close()
	p.Write([]byte("\n\ndata: b\n\n"))
	if n != 0 {
		t.Fatalf("%d events after Close", n)
	}
}

func TestNUL(t *testing.T) {
	// A NUL past the kept part of an over-long id line still voids the id,
	// so the result does not depend on how the line was split.
	const max = 64
	in := []byte("id: " + strings.Repeat("i", 3*max) + "\x00\ndata: x\n\n")
	a, b := parseAll(max, in), parseBytewise(max, in)
	if !reflect.DeepEqual(a, b) || len(a) != 1 || a[0].ID != "" {
		t.Fatalf("one write %#v, byte by byte %#v", a, b)
	}
}

func BenchmarkParser(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; i < 200; i++ {
		buf.WriteString("event: content_block_delta\n")
		buf.WriteString(`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, here is some streamed text"}}`)
		buf.WriteString("\n\n")
	}
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(0, func(Event) {})
		for off := 0; off < len(in); off += 1500 {
			p.Write(in[off:min(off+1500, len(in))])
		}
	}
}

// FuzzSSEParser checks that any input, cut into writes anywhere, gives the
// same events as one write, that the events agree with the reference
// reading of the standard, and that the limits hold.
func FuzzSSEParser(f *testing.F) {
	seeds := []string{
		"data: hello\n\n",
		"event: a\r\ndata: b\r\ndata: c\r\n\r\n",
		"\uFEFFid: 1\rdata: x\r\r: c\n",
		"data:a\n\rdata:b\r\n\n",
		"retry: 10\nid: a\x00\ndata\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
		"\xEF\xBB",
		"data: " + strings.Repeat("q", 300) + "\n\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint64(i)*7919, uint16(64+i*13))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, max16 uint16) {
		max := int(max16)%512 + minMaxEventBytes
		whole := parseAll(max, in)

		// Cut at up to 8 places chosen by the seed.
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], seed)
		var chunks [][]byte
		rest := in
		for _, c := range buf {
			if len(rest) == 0 {
				break
			}
			k := int(c) % (len(rest) + 1)
			chunks = append(chunks, rest[:k])
			rest = rest[k:]
		}
		chunks = append(chunks, rest)
		if got := parseAll(max, chunks...); !reflect.DeepEqual(got, whole) {
			t.Fatalf("cut into %d writes:\n got %#v\nwant %#v", len(chunks), got, whole)
		}
		if len(in) <= 4096 {
			if got := parseBytewise(max, in); !reflect.DeepEqual(got, whole) {
				t.Fatalf("byte by byte:\n got %#v\nwant %#v", got, whole)
			}
		}

		ref := reference(in)
		if len(ref) != len(whole) {
			t.Fatalf("%d events, the reference has %d", len(whole), len(ref))
		}
		for i, e := range whole {
			r := ref[i]
			if len(e.Data) > max || len(e.Type) > max || len(e.ID) > max {
				t.Fatalf("event %d exceeds the limit %d: data %d type %d id %d", i, max, len(e.Data), len(e.Type), len(e.ID))
			}
			if !e.Truncated && (e.Data != r.Data || e.Type != r.Type) {
				t.Fatalf("event %d: got %#v, the reference has %#v", i, e, r)
			}
			if e.Truncated && !strings.HasPrefix(r.Data, e.Data) {
				t.Fatalf("event %d: truncated data %q is not a prefix of %q", i, e.Data, r.Data)
			}
			if e.ID != r.ID[:min(len(r.ID), max)] {
				t.Fatalf("event %d: id %q, reference %q", i, e.ID, r.ID)
			}
			if e.Type != r.Type[:min(len(r.Type), max)] {
				t.Fatalf("event %d: type %q, reference %q", i, e.Type, r.Type)
			}
		}
	})
}
