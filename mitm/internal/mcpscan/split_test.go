package mcpscan

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

type piece struct {
	raw      string
	complete bool
}

// split runs an EventSplitter with cap max over in, fed in pieces of n,
// and returns what it handed out.
func split(in string, max, n int, flush bool) []piece {
	var out []piece
	e := NewEventSplitter(max, func(raw []byte, complete bool) {
		if len(raw) == 0 {
			panic("empty piece")
		}
		out = append(out, piece{string(raw), complete})
	})
	feed(e, []byte(in), n)
	if flush {
		e.Close()
	}
	return out
}

func join(ps []piece) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.raw)
	}
	return b.String()
}

func TestEventSplitter(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []piece
		why  string
	}{
		{
			name: "lf",
			in:   "event: message\ndata: a\n\ndata: b\n\n",
			want: []piece{{"event: message\ndata: a\n\n", true}, {"data: b\n\n", true}},
			why:  "each event up to and including its blank line",
		},
		{
			name: "crlf",
			in:   "data: a\r\n\r\ndata: b\r\ndata: c\r\n\r\n",
			want: []piece{{"data: a\r\n\r\n", true}, {"data: b\r\ndata: c\r\n\r\n", true}},
			why:  "CRLF line ends: the LF of the blank line's CRLF belongs to the event",
		},
		{
			name: "cr",
			in:   "data: a\r\rdata: b\r\r",
			want: []piece{{"data: a\r\r", true}, {"data: b\r\r", true}},
			why:  "CR alone ends a line too; the last event waits for a possible LF until Close",
		},
		{
			name: "leading blank line and comment",
			in:   "\n: hi\n\ndata: x\n\n",
			want: []piece{{"\n", true}, {": hi\n\n", true}, {"data: x\n\n", true}},
			why:  "a blank line alone is an (empty) event: the bytes are kept, in order",
		},
		{
			name: "oversize",
			in:   "data: " + strings.Repeat("x", 30) + "\n\ndata: y\n\n",
			max:  16,
			want: nil, // checked by pieces below
			why:  "an event over the cap is passed through in pieces, never marked complete; the next one is whole again",
		},
		{
			name: "unterminated",
			in:   "data: a\n\ndata: b\n",
			want: []piece{{"data: a\n\n", true}, {"data: b\n", false}},
			why:  "Close hands out an unfinished event as a piece, not as a whole event",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 5} {
				got := split(tt.in, tt.max, n, true)
				if join(got) != tt.in {
					t.Fatalf("pieces of %d: output %q is not the input (%s)", n, join(got), tt.why)
				}
				if tt.want == nil {
					var whole []string
					for _, p := range got {
						if p.complete {
							whole = append(whole, p.raw)
						}
					}
					if len(whole) != 1 || whole[0] != "data: y\n\n" {
						t.Fatalf("pieces of %d: whole events %q (%s)", n, whole, tt.why)
					}
					continue
				}
				if !equalPieces(merge(got), tt.want) {
					t.Fatalf("pieces of %d: %+v, want %+v (%s)", n, got, tt.want, tt.why)
				}
			}
		})
	}
}

// merge joins consecutive incomplete pieces, which a split feed makes more
// of.
func merge(ps []piece) []piece {
	var out []piece
	for _, p := range ps {
		if !p.complete && len(out) > 0 && !out[len(out)-1].complete {
			out[len(out)-1].raw += p.raw
			continue
		}
		out = append(out, p)
	}
	return out
}

func equalPieces(a, b []piece) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEventSplitterFlush(t *testing.T) {
	var got []piece
	e := NewEventSplitter(0, func(raw []byte, complete bool) { got = append(got, piece{string(raw), complete}) })
	e.Write([]byte("data: a\r\r"))
	if len(got) != 0 {
		t.Fatalf("%+v: an event ending in CR must wait for a possible LF", got)
	}
	e.Flush()
	e.Write([]byte("\ndata: b\n"))
	e.Flush()
	e.Write([]byte("\n"))
	want := []piece{{"data: a\r\r", true}, {"\n", false}, {"data: b\n", false}, {"\n", false}}
	if !equalPieces(got, want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestEventSplitterConcatenation: for any input and any cuts, what comes out
// is what went in, every whole event is within the cap and ends with a
// blank line.
func TestEventSplitterConcatenation(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"\r", "\n", "\r\n", "data: ", "x", "yy", ":", "event: e", "é"}
	for range 2000 {
		var b strings.Builder
		for range r.IntN(60) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		in := b.String()
		max := 1 + r.IntN(40)
		var out bytes.Buffer
		e := NewEventSplitter(max, func(raw []byte, complete bool) {
			if complete && (len(raw) > max || !endsEvent(raw)) {
				t.Fatalf("%q (cap %d): whole event %q", in, max, raw)
			}
			out.Write(raw)
		})
		rest := []byte(in)
		for len(rest) > 0 {
			k := 1 + r.IntN(len(rest))
			e.Write(rest[:k])
			if r.IntN(8) == 0 {
				e.Flush()
			}
			rest = rest[k:]
		}
		e.Close()
		if out.String() != in {
			t.Fatalf("%q came out as %q", in, out.String())
		}
	}
}

// endsEvent reports whether raw ends with a blank line: without its last
// line end, it is empty or ends with another.
func endsEvent(raw []byte) bool {
	switch {
	case bytes.HasSuffix(raw, []byte("\r\n")):
		raw = raw[:len(raw)-2]
	case bytes.HasSuffix(raw, []byte("\n")), bytes.HasSuffix(raw, []byte("\r")):
		raw = raw[:len(raw)-1]
	default:
		return false
	}
	return len(raw) == 0 || raw[len(raw)-1] == '\n' || raw[len(raw)-1] == '\r'
}

func TestEventData(t *testing.T) {
	tests := []struct {
		raw   string
		event string
		data  string
		nil_  bool
		why   string
	}{
		{"event: message\ndata: {\"a\":1}\n\n", "message", `{"a":1}`, false, "the common form"},
		{"\xEF\xBB\xBFdata:x\r\ndata:  y\r\n\r\n", "", "x\n y", false, "BOM skipped; one space dropped, not two; CRLF"},
		{": c\nid: 3\nretry: 5\ndata\nevent: endpoint\n\n", "endpoint", "", false, "a data field without a colon is empty data; other fields ignored"},
		{": only a comment\n\n", "", "", true, "no data field: no data"},
		{"data: a\n\ndata: b\n\n", "", "a", false, "only the first event is read"},
	}
	for _, tt := range tests {
		ev, data := EventData([]byte(tt.raw))
		if ev != tt.event || string(data) != tt.data || (data == nil) != tt.nil_ {
			t.Errorf("%q: %q %q (nil %v) (%s)", tt.raw, ev, data, data == nil, tt.why)
		}
	}
}

func TestFormatEvent(t *testing.T) {
	tests := []struct {
		event string
		data  string
		want  string
		why   string
	}{
		{"message", `{"a":1}`, "event: message\ndata: {\"a\":1}\n\n", "one line of data"},
		{"", "a\nb\r\nc\rd", "data: a\ndata: b\ndata: c\ndata: d\n\n", "each line of data its own data line, whatever its line end"},
		{"ev\nil", "", "event: evil\ndata: \n\n", "a line end in the name cannot start a field"},
	}
	for _, tt := range tests {
		got := FormatEvent(tt.event, []byte(tt.data))
		if string(got) != tt.want {
			t.Errorf("%q %q: %q (%s)", tt.event, tt.data, got, tt.why)
		}
		ev, data := EventData(got)
		if ev != strings.NewReplacer("\n", "", "\r", "").Replace(tt.event) || string(data) != strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(tt.data) {
			t.Errorf("%q %q read back as %q %q", tt.event, tt.data, ev, data)
		}
	}
}
