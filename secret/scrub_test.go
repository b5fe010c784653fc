package secret

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const realKey = "sk-ant-api03-Zq9vX2mK7pL4wR8tY1uE6oI3aS5dF0gH"

func newTestScrubber(t testing.TB) *Scrubber {
	t.Helper()
	s, err := NewScrubber([]ScrubNeedle{{ID: 1, Value: []byte(realKey), Replacement: []byte(ph)}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scrubAll runs a stream over data written in pieces of size n (0: whole).
func scrubAll(t testing.TB, s *Scrubber, data []byte, n int) (string, []ScrubHit) {
	t.Helper()
	var out bytes.Buffer
	var hits []ScrubHit
	st := s.Stream(&out, func(h ScrubHit) { hits = append(hits, h) })
	for rest := data; len(rest) > 0; {
		k := len(rest)
		if n > 0 {
			k = min(k, n)
		}
		if _, err := st.Write(rest[:k]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String(), hits
}

// sseOneCharPerEvent is a model's streamed answer spelling v one
// character per event, as the guest's client reads it.
func sseOneCharPerEvent(v string) string {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\"}}\n\n")
	for _, c := range v {
		d, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": string(c)}})
		fmt.Fprintf(&b, "event: content_block_delta\ndata: %s\n\n", d)
	}
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}

// deltaText puts together the text of an SSE stream's deltas, as a client
// does.
func deltaText(t testing.TB, sse string) string {
	var b strings.Builder
	for _, line := range strings.Split(sse, "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Delta struct{ Text string } `json:"delta"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("the scrubbed stream is no longer JSON: %v in %q", err, d)
		}
		b.WriteString(ev.Delta.Text)
	}
	return b.String()
}

func spaced(v string) string { return strings.Join(strings.Split(v, ""), " ") }

// leaks reports whether text still holds the real key in a form the
// matcher knows, as it runs or with whitespace taken out.
func leaks(text string) bool {
	m, _ := NewMatcher([]Needle{{ID: 1, Value: []byte(realKey)}})
	caseless, _ := newCaselessMatcher([]Needle{{ID: 1, Value: []byte(realKey)}})
	_, raw := m.FindString(text)
	_, folded := caseless.Find(bytes.ToLower(foldSpace([]byte(text))))
	return raw || folded
}

func TestScrubberTakesTheValueOutOfEveryFold(t *testing.T) {
	s := newTestScrubber(t)
	b64 := base64.StdEncoding.EncodeToString([]byte("blob: " + realKey + "\n"))
	cases := []struct {
		name, in string
		why      string
		folded   bool
		// read is how the guest's client reads the output; nil: as it is.
		read func(t testing.TB, out string) string
	}{
		{name: "raw", in: "you sent " + realKey + " and more", why: "an API that echoes its request"},
		{name: "hex", in: "x=" + hex.EncodeToString([]byte(realKey)), why: "a hex dump of the request"},
		{name: "percent", in: "q=" + PercentEncode(realKey, false), why: "a URL built from the request"},
		{name: "base64", in: `{"content":"` + b64 + `"}`, why: "a git blob read back through an API, base64",
			read: func(t testing.TB, out string) string { return decodeB64Field(t, out) }},
		{name: "base64 wrapped", in: `{"content":"` + wrap(b64, 8, `\n`) + `"}`, folded: true, why: "GitHub's contents API wraps base64 with \\n escapes",
			read: func(t testing.TB, out string) string { return decodeB64Field(t, out) }},
		{name: "spaced", in: "sure: " + spaced(realKey) + " done", folded: true, why: "\"repeat with spaces\""},
		{name: "upper case", in: "SURE: " + strings.ToUpper(realKey), folded: true, why: "\"repeat in capitals\", or a header name a hop lowercased"},
		{name: "hex upper case, spaced", in: spaced(strings.ToUpper(hex.EncodeToString([]byte(realKey)))), folded: true, why: "a hex dump"},
		{name: "one character per SSE event", in: sseOneCharPerEvent(realKey), folded: true, why: "a model streaming the key back a token at a time",
			read: deltaText},
		{name: "JSON escapes", in: `{"text":"\u0073\u006b` + realKey[2:] + `"}`, folded: true, why: "an escaped first letter hides the raw form"},
		{name: "JSON escapes spaced across values", in: `[{"t":"sk-ant-api03"},{"t":" - "},{"t":"` + realKey[13:] + `"}]`, folded: true, why: "the pieces of one key path are one text"},
	}
	for _, c := range cases {
		for _, n := range []int{0, 1, 7, 64} {
			t.Run(fmt.Sprintf("%s/writes of %d", c.name, n), func(t *testing.T) {
				out, hits := scrubAll(t, s, []byte(c.in), n)
				if len(hits) == 0 {
					t.Fatalf("no hit (%s); out:\n%s", c.why, out)
				}
				if hits[0].ID != 1 {
					t.Errorf("hit %+v", hits[0])
				}
				read := out
				if c.read != nil {
					read = c.read(t, out)
				}
				if leaks(read) || leaks(out) {
					t.Fatalf("the value reached the output (%s):\n%s", c.why, read)
				}
				phm, _ := NewMatcher([]Needle{{ID: 1, Value: []byte(ph)}})
				if _, ok := phm.FindString(out); !ok && !c.folded {
					t.Errorf("the placeholder did not take the value's place:\n%s", out)
				}
			})
		}
	}
}

func wrap(s string, n int, sep string) string {
	var b strings.Builder
	for i := 0; i < len(s); i += n {
		b.WriteString(s[i:min(i+n, len(s))])
		b.WriteString(sep)
	}
	return b.String()
}

func decodeB64Field(t testing.TB, out string) string {
	var v struct{ Content string }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("the scrubbed body is no longer JSON: %v: %s", err, out)
	}
	b, _ := base64.StdEncoding.DecodeString(strings.ReplaceAll(v.Content, "\n", ""))
	return v.Content + "\n" + string(b)
}

func TestScrubberPlaceholderInTheClientsText(t *testing.T) {
	s := newTestScrubber(t)
	// Written whole, nothing is passed on before the match is found: the
	// client's text holds the placeholder where the key was.
	out, hits := scrubAll(t, s, []byte(sseOneCharPerEvent(realKey)), 0)
	if got := deltaText(t, out); got != ph {
		t.Errorf("the client reads %q, want the placeholder %q", got, ph)
	}
	if len(hits) != 1 || !hits[0].Folded || hits[0].Passed != 0 {
		t.Errorf("hits %+v", hits)
	}
	// An event at a time (as it streams), the first FoldedHold-1
	// characters go on before the view holds.
	out, hits = scrubAll(t, s, []byte(sseOneCharPerEvent(realKey)), 40)
	if got, want := deltaText(t, out), realKey[:FoldedHold-1]+ph; got != want {
		t.Errorf("streamed, the client reads %q, want %q", got, want)
	}
	if len(hits) != 1 || hits[0].Passed != FoldedHold-1 {
		t.Errorf("hits %+v", hits)
	}
}

func TestScrubberPassesOrdinaryText(t *testing.T) {
	s := newTestScrubber(t)
	var out bytes.Buffer
	st := s.Stream(&out, func(ScrubHit) { t.Error("a hit in ordinary text") })
	// An event whose text ends in the key's first letters goes on at once:
	// a streamed answer is not held up by a word like "asks".
	ev := "data: {\"delta\":{\"text\":\"she asks sk-ant\"}}\n\n"
	st.Write([]byte(ev))
	if out.String() != ev {
		t.Errorf("held back %q of an ordinary event", ev[out.Len():])
	}
	text := strings.Repeat("plain words, JSON {\"a\":[1,\"b\\u00e9\"]} and base64 c2stYW50 ", 500)
	st.Write([]byte(text))
	st.Close()
	if out.String() != ev+text {
		t.Error("ordinary text was changed")
	}
}

func TestScrubberBoundsWhatItHolds(t *testing.T) {
	s := newTestScrubber(t)
	var out bytes.Buffer
	st := s.Stream(&out, nil)
	st.Write([]byte(spaced(realKey[:20])))
	var err error
	for i := 0; i < 2*MaxHeld/4096 && err == nil; i++ {
		_, err = st.Write(bytes.Repeat([]byte(" "), 4096))
	}
	if !errors.Is(err, ErrHeldTooLong) {
		t.Fatalf("a match in progress spread over 2 MiB of whitespace: %v, want ErrHeldTooLong", err)
	}
	if leaks(out.String()) {
		t.Fatal("the value got out")
	}
}

func TestScrubString(t *testing.T) {
	s := newTestScrubber(t)
	for _, c := range []struct{ in, why string }{
		{"Bearer " + realKey, "a reflected Authorization header"},
		{"k=" + spaced(realKey), "spaced in a header"},
		{base64.StdEncoding.EncodeToString([]byte("u:" + realKey)), "a Basic credential"},
	} {
		got, hits := s.ScrubString(c.in)
		if len(hits) == 0 || leaks(got) {
			t.Errorf("%s: %q → %q, hits %v", c.why, c.in, got, hits)
		}
	}
	if got, hits := s.ScrubString("text/plain; charset=utf-8"); got != "text/plain; charset=utf-8" || hits != nil {
		t.Errorf("an ordinary value changed: %q %v", got, hits)
	}
}

// FuzzScrubStream: whatever the stream and however it is cut, a planted
// value never reaches the output whole in any form or fold, and a stream
// without one goes through unchanged.
func FuzzScrubStream(f *testing.F) {
	f.Add([]byte(`{"a":"b"} data: x`), []byte{3, 9, 200}, uint8(0), uint8(5))
	f.Add([]byte("event: x\ndata: {\"delta\":{\"text\":\"hi\"}}\n\n"), []byte{1}, uint8(1), uint8(2))
	f.Add([]byte(`"\u00`), []byte{2}, uint8(6), uint8(1))
	s := newTestScrubber(f)
	plants := []func(string) string{
		nil,
		func(v string) string { return v },
		spaced,
		sseOneCharPerEvent,
		func(v string) string { return base64.StdEncoding.EncodeToString([]byte("x" + v)) },
		func(v string) string { return hex.EncodeToString([]byte(v)) },
		func(v string) string { return `"\u0073` + v[1:] + `"` },
		strings.ToUpper,
	}
	f.Fuzz(func(t *testing.T, data, sizes []byte, plant, at uint8) {
		if k := int(plant) % len(plants); k == 2 || k == 3 || k >= 6 {
			// A folded form is looked for in text: binary bytes around
			// it (a control character in 64) are scanned as they run.
			data = bytes.Map(func(r rune) rune {
				if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
					return -1
				}
				return r
			}, data)
		}
		if p := plants[int(plant)%len(plants)]; p != nil {
			pos := min(int(at), len(data))
			data = append(append(append([]byte{}, data[:pos]...), p(realKey)...), data[pos:]...)
		}
		var out bytes.Buffer
		hits := 0
		st := s.Stream(&out, func(ScrubHit) { hits++ })
		for rest, i := data, 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(sizes) > 0 {
				n = min(n, int(sizes[i%len(sizes)])+1)
			}
			if _, err := st.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if leaks(out.String()) {
			t.Fatalf("the value reached the output:\n%q", out.String())
		}
		if hits == 0 && !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("no hit, but the stream changed:\n%q\n%q", data, out.Bytes())
		}
	})
}

func BenchmarkScrubStream(b *testing.B) {
	s := newTestScrubber(b)
	sse := []byte(strings.Repeat("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the quick brown fox jumps\"}}\n\n", 2000))
	random := make([]byte, 256<<10)
	for i := range random {
		random[i] = byte(i*7919 + i>>3)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"sse", sse}, {"binary", random}} {
		b.Run(c.name, func(b *testing.B) {
			// One stream, as one long response: its buffers are reused.
			st := s.Stream(discard{}, nil)
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				for rest := c.data; len(rest) > 0; {
					k := min(len(rest), 32<<10)
					if _, err := st.Write(rest[:k]); err != nil {
						b.Fatal(err)
					}
					rest = rest[k:]
				}
			}
			st.Close()
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestScrubberBinary: in binary bytes (a download) the folded views rest,
// the contiguous forms are still found, and text after the binary is read
// folded again.
func TestScrubberBinary(t *testing.T) {
	s := newTestScrubber(t)
	bin := make([]byte, 64<<10)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	if !binaryPiece(bin[:scrubPiece]) || binaryPiece([]byte(sseOneCharPerEvent(realKey))) {
		t.Fatal("binaryPiece does not tell the download from the event stream")
	}
	in := append(append(append([]byte{}, bin...), "raw "+realKey+" "...), bin...)
	in = append(in, strings.Repeat("some text after the download. ", 600)...)
	in = append(in, spaced(realKey)...)
	out, hits := scrubAll(t, s, in, 4096)
	if len(hits) != 2 || leaks(out) {
		t.Errorf("hits %+v; the key raw inside binary and spaced after it must both be found", hits)
	}
}
