package mitm

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/capsem/capsem/store"
)

// h2Frames builds a client's bytes: the preface, a SETTINGS frame, then
// each request's header block — from one HPACK encoder, so later blocks
// refer to the dynamic table earlier ones filled — split into HEADERS and
// CONTINUATION frames of at most split bytes, padded and with a priority
// when asked.
func h2Frames(t testing.TB, split int, padded bool, reqs ...[]hpack.HeaderField) []byte {
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&out, nil)
	fr.WriteSettings()
	var blk bytes.Buffer
	enc := hpack.NewEncoder(&blk)
	for i, fields := range reqs {
		blk.Reset()
		for _, f := range fields {
			enc.WriteField(f)
		}
		b := blk.Bytes()
		id := uint32(2*i + 1)
		first := b[:min(split, len(b))]
		p := http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(first) == len(b)}
		if padded {
			p.PadLength = 7
			p.Priority = http2.PriorityParam{StreamDep: 0, Weight: 15}
		}
		if err := fr.WriteHeaders(p); err != nil {
			t.Fatal(err)
		}
		for b = b[len(first):]; len(b) > 0; {
			n := min(split, len(b))
			fr.WriteContinuation(id, n == len(b), b[:n])
			b = b[n:]
		}
		fr.WriteData(id, true, []byte("data frames pass through the tap unheld"))
	}
	return out.Bytes()
}

func hf(kv ...string) []hpack.HeaderField {
	var out []hpack.HeaderField
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestH2HeadsDecodesInOrder(t *testing.T) {
	reqs := [][]hpack.HeaderField{
		hf(":method", "GET", ":scheme", "https", ":authority", "api.test", ":path", "/a", "zeta", "1", "alpha", "2", "zeta", "3"),
		hf(":method", "GET", ":scheme", "https", ":authority", "api.test", ":path", "/a", "alpha", "2", "zeta", "1", "cookie", "a=1", "mid", "m", "cookie", "b=2"),
		hf(":method", "CONNECT", ":authority", "api.test:443"),
		hf(":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":path", "/ws", ":authority", "api.test", "sec-websocket-version", "13"),
	}
	want := []wireHead{
		{"GET", "/a", fields("Zeta", "1", "Alpha", "2", "Zeta", "3")},
		{"GET", "/a", fields("Alpha", "2", "Zeta", "1", "Cookie", "a=1", "Mid", "m", "Cookie", "b=2")},
		{"CONNECT", "api.test:443", nil},
		{"CONNECT", "/ws", fields(":protocol", "websocket", "Sec-Websocket-Version", "13")},
	}
	for _, split := range []int{3, 16, 1 << 14} {
		for _, padded := range []bool{false, true} {
			data := h2Frames(t, split, padded, reqs...)
			for _, step := range []int{1, 5, 9, 100, len(data)} {
				tp := newH2Heads()
				for b := data; len(b) > 0; {
					n := min(step, len(b))
					tp.feed(b[:n])
					b = b[n:]
				}
				if tp.off || !reflect.DeepEqual(tp.q.heads, want) {
					t.Fatalf("split %d padded %v step %d: off %v, heads\n%+v\nwant\n%+v", split, padded, step, tp.off, tp.q.heads, want)
				}
			}
		}
	}
	// The server joins cookie crumbs; the match records them joined, in
	// the first crumb's place.
	tp := newH2Heads()
	tp.feed(h2Frames(t, 100, false, reqs[1]))
	r := &http.Request{Method: "GET", RequestURI: "/a", Header: http.Header{"Alpha": {"2"}, "Zeta": {"1"}, "Cookie": {"a=1; b=2"}, "Mid": {"m"}}}
	if got := tp.match(r); !reflect.DeepEqual(got, fields("Alpha", "2", "Zeta", "1", "Cookie", "a=1; b=2", "Mid", "m")) {
		t.Errorf("match: %v", got)
	}
}

func TestH2HeadsStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		why  string
	}{
		{"no-preface", []byte("GET / HTTP/1.1\r\n\r\n"), "not HTTP/2"},
		{"bad-hpack", append([]byte(http2.ClientPreface), 0, 0, 1, frameHeaders, flagEndHeaders, 0, 0, 0, 1, 0xff), "an index past the tables"},
		{"interleaved", append(append([]byte(http2.ClientPreface), 0, 0, 1, frameHeaders, 0, 0, 0, 0, 1, 0x82), 0, 0, 0, 0, 0, 0, 0, 0, 1),
			"a frame between HEADERS and its CONTINUATION is a connection error"},
		{"stray-continuation", append([]byte(http2.ClientPreface), 0, 0, 0, frameContinuation, flagEndHeaders, 0, 0, 0, 1), "nothing to continue"},
		{"huge-block", append([]byte(http2.ClientPreface), 0xff, 0xff, 0xff, frameHeaders, 0, 0, 0, 0, 1), "more than the server accepts"},
		{"push-promise", append([]byte(http2.ClientPreface), 0, 0, 0, framePushPromise, 0, 0, 0, 0, 1), "a client never sends one"},
	} {
		tp := newH2Heads()
		tp.feed(tc.data)
		if !tp.off {
			t.Errorf("%s: the tap goes on (%s)", tc.name, tc.why)
		}
	}
}

func TestH2HeadsQueueIsBounded(t *testing.T) {
	var reqs [][]hpack.HeaderField
	for range 1000 {
		reqs = append(reqs, hf(":method", "GET", ":scheme", "https", ":authority", "a", ":path", "/", "x", strings.Repeat("v", 100)))
	}
	tp := newH2Heads()
	tp.feed(h2Frames(t, 1<<14, false, reqs...))
	if len(tp.q.heads) != h2QueuedHeads || tp.off {
		t.Errorf("%d heads queued (off %v), want the last %d", len(tp.q.heads), tp.off, h2QueuedHeads)
	}
}

// FuzzH2Tap feeds arbitrary bytes, after the client preface, to the HTTP/2
// request tap in arbitrary pieces. It must never panic nor hold more than
// its bounds, and every request head x/net's Framer (the server's reader)
// decodes from the same bytes must be among the tap's heads, in order and
// with the same fields, until the tap stops.
func FuzzH2Tap(f *testing.F) {
	get := hf(":method", "GET", ":scheme", "https", ":authority", "api.test", ":path", "/a", "zeta", "1", "alpha", "2")
	f.Add(h2Frames(f, 1<<14, false, get, get)[len(http2.ClientPreface):], uint8(0))
	f.Add(h2Frames(f, 5, true, get, hf(":method", "CONNECT", ":authority", "x:1"), get)[len(http2.ClientPreface):], uint8(8))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		data = append([]byte(http2.ClientPreface), data...)
		tp := newH2Heads()
		for b := data; len(b) > 0; {
			n := min(int(step)+1, len(b))
			tp.feed(b[:n])
			b = b[n:]
			if len(tp.q.heads) > h2QueuedHeads || tp.q.bytes > maxQueuedBytes || len(tp.block) > maxHeaderBlock {
				t.Fatalf("past its bounds: %d heads, %d bytes, block %d", len(tp.q.heads), tp.q.bytes, len(tp.block))
			}
		}
		fr := http2.NewFramer(nil, bytes.NewReader(data[len(http2.ClientPreface):]))
		fr.SetMaxReadFrameSize(1 << 20)
		fr.ReadMetaHeaders = hpack.NewDecoder(h2DecoderTableSize, nil)
		heads := tp.q.heads
		for n := 0; n < h2QueuedHeads; {
			frame, err := fr.ReadFrame()
			if err != nil {
				if _, ok := err.(http2.StreamError); ok {
					continue
				}
				return
			}
			mh, ok := frame.(*http2.MetaHeadersFrame)
			if !ok || mh.PseudoValue("method") == "" {
				continue
			}
			n++
			want := wireHead{method: mh.PseudoValue("method"), target: mh.PseudoValue("path")}
			if want.method == "CONNECT" && mh.PseudoValue("protocol") == "" {
				want.target = mh.PseudoValue("authority")
			}
			if p := mh.PseudoValue("protocol"); p != "" {
				want.fields = append(want.fields, store.Header{Name: ":protocol", Value: p})
			}
			for _, f := range mh.RegularFields() {
				want.fields = append(want.fields, store.Header{Name: http.CanonicalHeaderKey(f.Name), Value: f.Value})
			}
			for len(heads) > 0 && !reflect.DeepEqual(heads[0], want) {
				heads = heads[1:]
			}
			if len(heads) == 0 {
				if tp.off {
					return // the tap stopped: sorted from here on
				}
				t.Fatalf("head %d %+v decoded by the Framer is not among the tap's %+v", n, want, tp.q.heads)
			}
			heads = heads[1:]
		}
	})
}
