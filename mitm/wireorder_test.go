package mitm

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"

	"github.com/capsem/capsem/mitm/internal/fieldorder"
	"github.com/capsem/capsem/store"
)

func fields(kv ...string) []store.Header {
	var out []store.Header
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, store.Header{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestInWireOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		wire []store.Header
		want []store.Header // nil: no match
		why  string
	}{
		{"order", http.Header{"A": {"1"}, "Z": {"2"}}, fields("Z", "2", "A", "1"), fields("Z", "2", "A", "1"),
			"the wire's order, not the map's"},
		{"duplicates", http.Header{"X": {"1", "2"}, "Y": {"3"}}, fields("X", "1", "Y", "3", "X", "2"), fields("X", "1", "Y", "3", "X", "2"),
			"a duplicate keeps its place"},
		{"host", http.Header{"A": {"1"}}, fields("Host", "h", "A", "1"), fields("Host", "h", "A", "1"),
			"Go moves Host out of the header; the wire keeps it"},
		{"framing", http.Header{"A": {"1"}}, fields("Content-Length", "3", "Transfer-Encoding", "chunked", "A", "1"),
			fields("Content-Length", "3", "Transfer-Encoding", "chunked", "A", "1"), "the framing headers Go consumes stay recorded"},
		{"other-value", http.Header{"A": {"1"}}, fields("A", "2"), nil, "another request's head"},
		{"missing-on-wire", http.Header{"A": {"1"}, "B": {"2"}}, fields("A", "1"), nil, "a header the wire did not have"},
		{"extra-on-wire", http.Header{"A": {"1"}}, fields("A", "1", "B", "2"), nil, "a header the request does not have"},
		{"extra-value", http.Header{"A": {"1"}}, fields("A", "1", "A", "1"), nil, "one value too many"},
		{"pragma", http.Header{"Pragma": {"no-cache"}, "Cache-Control": {"no-cache"}}, fields("Pragma", "no-cache"), fields("Pragma", "no-cache"),
			"Go adds Cache-Control for Pragma: no-cache; the guest did not send it"},
		{"cookies", http.Header{"Cookie": {"a=1; b=2"}, "X": {"x"}}, fields("Cookie", "a=1", "X", "x", "Cookie", "b=2"), fields("Cookie", "a=1; b=2", "X", "x"),
			"Go's HTTP/2 server joins cookie crumbs"},
	} {
		got, ok := inWireOrder(tc.h, tc.wire)
		if ok != (tc.want != nil) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: inWireOrder = %v, %v; want %v (%s)", tc.name, got, ok, tc.want, tc.why)
		}
	}
}

// pipeline is requests one after another on a connection, with bodies
// that look like requests.
const pipeline = "GET /a HTTP/1.1\r\nHost: api.test\r\nZeta: 1\r\nAlpha: 2\r\nZeta: 3\r\n\r\n" +
	"POST /b HTTP/1.1\r\nHost: api.test\r\nContent-Length: 41\r\nB: b\r\n\r\nGET /admin/x HTTP/1.1\r\nHost: api.test\r\n\r\n" +
	"\r\n" + // Go's server skips a CRLF after a POST
	"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHost: api.test\r\nC: c\r\n\r\n" +
	"29;ext=1\r\nGET /admin/y HTTP/1.1\r\nHost: api.test\r\n\r\n\r\n0\r\nTrailer-A: t\r\n\r\n" +
	"GET /d HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\nFold: a\r\n  b\r\nD:  d \r\n\r\n" +
	"PUT /e HTTP/1.1\nHost: api.test\nE: e\n\n"

var pipelineWant = []struct {
	target string
	fields []store.Header
}{
	{"/a", fields("Host", "api.test", "Zeta", "1", "Alpha", "2", "Zeta", "3")},
	{"/b", fields("Host", "api.test", "Content-Length", "41", "B", "b")},
	{"/c", fields("Transfer-Encoding", "chunked", "Host", "api.test", "C", "c")},
	{"/d", fields("Transfer-Encoding", "chunked", "Content-Length", "0", "Fold", "a b", "D", "d")},
	{"/e", fields("Host", "api.test", "E", "e")},
}

func TestH1HeadsFollowsPipelinedRequests(t *testing.T) {
	for _, step := range []int{1, 2, 3, 7, 64, len(pipeline)} {
		var tp h1Heads
		for b := []byte(pipeline); len(b) > 0; {
			n := min(step, len(b))
			tp.feed(b[:n])
			b = b[n:]
		}
		br := bufio.NewReader(strings.NewReader(pipeline))
		for i, want := range pipelineWant {
			if i == 2 || i == 3 {
				br.Discard(numLeadingCRLF(br))
			}
			req, err := http.ReadRequest(br)
			if err != nil {
				t.Fatalf("step %d: request %d: %v", step, i, err)
			}
			io.Copy(io.Discard, req.Body)
			got := tp.match(req)
			if req.RequestURI != want.target || !reflect.DeepEqual(got, want.fields) {
				t.Errorf("step %d: %s: fields %v, want %v", step, req.RequestURI, got, want.fields)
			}
		}
		if tp.st != headsRequestLine || len(tp.q.heads) != 0 {
			t.Errorf("step %d: the tap ended in state %d with %d heads unclaimed", step, tp.st, len(tp.q.heads))
		}
	}
}

func numLeadingCRLF(br *bufio.Reader) int {
	p, _ := br.Peek(2)
	n := 0
	for _, c := range p {
		if c != '\r' && c != '\n' {
			break
		}
		n++
	}
	return n
}

func TestH1HeadsStops(t *testing.T) {
	const first = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name, next string
		why        string
	}{
		{"te-unsupported", "POST /b HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "Go's server refuses it and closes"},
		{"te-twice", "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "likewise"},
		{"cl-differ", "POST /b HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "RFC 9112 §6.3"},
		{"cl-bad", "POST /b HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "not a length"},
		{"no-colon", "GET /b HTTP/1.1\r\nNoColon\r\n\r\n", "a malformed line"},
		{"space-in-name", "GET /b HTTP/1.1\r\nBad Name: x\r\n\r\n", "Go's server refuses names that are not tokens"},
		{"leading-fold", "GET /b HTTP/1.1\r\n folded: x\r\n\r\n", "a continuation with nothing to continue"},
		{"request-line", "GARBAGE\r\n\r\n", "no request line (a WebSocket frame, say)"},
		{"chunk-size", "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not hex"},
		{"chunk-end", "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXY", "a chunk not followed by CRLF"},
		{"head-too-long", "GET /b HTTP/1.1\r\nA: " + strings.Repeat("a", maxHeadBytes) + "\r\n\r\n", "past the server's MaxHeaderBytes"},
	} {
		var tp h1Heads
		tp.feed([]byte(first + tc.next + "GET /c HTTP/1.1\r\nHost: x\r\n\r\n"))
		if tp.st != headsOff {
			t.Errorf("%s: the tap goes on in state %d (%s)", tc.name, tp.st, tc.why)
		}
		if len(tp.q.heads) == 0 || tp.q.heads[0].target != "/a" {
			t.Errorf("%s: lost the head before: %+v", tc.name, tp.q.heads)
		}
		for _, h := range tp.q.heads {
			if h.target == "/c" {
				t.Errorf("%s: followed past the point it lost track (%s)", tc.name, tc.why)
			}
		}
	}
	// After stopFollowing (a WebSocket upgrade), nothing more is parsed.
	var tp h1Heads
	tp.feed([]byte(first))
	tp.stopFollowing()
	tp.feed([]byte(first))
	if len(tp.q.heads) != 0 {
		t.Errorf("heads after stopFollowing: %+v", tp.q.heads)
	}
}

func TestH1HeadsQueueIsBounded(t *testing.T) {
	var tp h1Heads
	tp.feed([]byte(strings.Repeat("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", 1000)))
	if len(tp.q.heads) != maxQueuedHeads {
		t.Errorf("%d heads queued, want the last %d", len(tp.q.heads), maxQueuedHeads)
	}
}

func TestPeekResponseFields(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nZeta: 1\r\nContent-Type: text/plain\r\nAlpha: 2\r\nFold: a\r\n\tb\r\nContent-Length: 2\r\n\r\nok"
	br := bufio.NewReaderSize(&slowReader{r: strings.NewReader(resp)}, 16<<10)
	got, ok := fieldorder.PeekResponse(br)
	want := fields("Zeta", "1", "Content-Type", "text/plain", "Alpha", "2", "Fold", "a b", "Content-Length", "2")
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("peekResponseFields = %v, %v; want %v", got, ok, want)
	}
	r, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the peek consumed the head: %v", err)
	}
	if out, ok := inWireOrder(r.Header, got); !ok || !reflect.DeepEqual(out, want) {
		t.Errorf("inWireOrder = %v, %v", out, ok)
	}
	// A head larger than the buffer: no order, and ReadResponse still works.
	big := "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("a", 20<<10) + "\r\n\r\n"
	br = bufio.NewReaderSize(strings.NewReader(big), 16<<10)
	if _, ok := fieldorder.PeekResponse(br); ok {
		t.Errorf("a head past the buffer was peeked")
	}
	if _, err := http.ReadResponse(br, nil); err != nil {
		t.Errorf("ReadResponse after a failed peek: %v", err)
	}
}

// slowReader returns one byte per Read, as a trickling upstream would.
type slowReader struct{ r io.Reader }

func (s *slowReader) Read(b []byte) (int, error) { return s.r.Read(b[:min(1, len(b))]) }

// FuzzH1Tap feeds arbitrary guest bytes to the HTTP/1.1 request tap in
// arbitrary pieces. It must never panic nor keep more than maxQueuedHeads
// heads, and every request Go's parser reads from the same bytes (as many
// as fit the queue) must be found by the tap with its header in wire
// order: the tap may lose track where Go would not only by stopping.
func FuzzH1Tap(f *testing.F) {
	f.Add([]byte(pipeline), uint8(0))
	f.Add([]byte(pipeline), uint8(6))
	f.Add([]byte("GET / HTTP/1.1\r\nA: 1\r\nA: 2\r\n\r\nGET / HTTP/1.1\r\n\r\n"), uint8(1))
	f.Add([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /x HTTP/1.1\r\n\r\n"), uint8(2))
	f.Add([]byte("GET / HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		var tp h1Heads
		for b := data; len(b) > 0; {
			n := min(int(step)+1, len(b))
			tp.feed(b[:n])
			b = b[n:]
			if len(tp.q.heads) > maxQueuedHeads {
				t.Fatalf("%d heads queued", len(tp.q.heads))
			}
		}
		br := bufio.NewReader(bytes.NewReader(data))
		for i := 0; i < maxQueuedHeads; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			for k := range req.Header {
				if !httpguts.ValidHeaderFieldName(k) {
					return // Go's server refuses it (400) and closes
				}
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if tp.match(req) == nil {
				if tp.st == headsOff {
					return // stopped: recorded sorted from here on
				}
				t.Fatalf("request %d (%s %s) parsed by Go but not found by the tap; header %v", i, req.Method, req.RequestURI, req.Header)
			}
		}
	})
}

// FuzzPeekResponseFields: a response head peeked for its order must be
// the head http.ReadResponse then reads (never another order than the
// wire's), and the peek must consume nothing. Upstreams are reached on the
// guest's behalf, and a guest may run one.
func FuzzPeekResponseFields(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nZ: 1\r\nA: 2\r\nZ: 3\r\nContent-Length: 0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\nFold: a\n b\nTransfer-Encoding: chunked\n\n0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		got, ok := fieldorder.PeekResponse(br)
		resp, err := http.ReadResponse(br, nil)
		unpeeked, err2 := http.ReadResponse(bufio.NewReaderSize(bytes.NewReader(data), 4096), nil)
		if (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(resp.Header, unpeeked.Header) {
			t.Fatalf("the peek changed what ReadResponse reads: %v / %v", err, err2)
		}
		if err != nil || !ok {
			return
		}
		if _, match := inWireOrder(resp.Header, got); !match {
			// Allowed only for names Go keeps that are no tokens, which
			// the peek refuses; a match must never be wrong, and this is
			// no match.
			for k := range resp.Header {
				if !httpguts.ValidHeaderFieldName(k) {
					return
				}
			}
			t.Fatalf("peeked %v but ReadResponse read %v", got, resp.Header)
		}
	})
}

// BenchmarkH1HeadsRequest is the tap's cost per request: feeding a typical
// head (an SDK's 11 header lines, 420 bytes) and claiming it.
func BenchmarkH1HeadsRequest(b *testing.B) {
	head := "POST /v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\nUser-Agent: Anthropic/JS 0.52.0\r\n" +
		"Accept: application/json\r\nContent-Type: application/json\r\nAnthropic-Version: 2023-06-01\r\n" +
		"X-Api-Key: sk-ant-api03-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\nX-Stainless-Lang: js\r\nX-Stainless-Os: Linux\r\n" +
		"X-Stainless-Runtime: node\r\nAccept-Encoding: gzip, deflate\r\nContent-Length: 2\r\n\r\n{}"
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		b.Fatal(err)
	}
	var tp h1Heads
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	for b.Loop() {
		tp.feed([]byte(head))
		if tp.match(req) == nil {
			b.Fatal("no match")
		}
	}
}

// BenchmarkH1HeadsBody is the tap's cost on body bytes, which it only counts.
func BenchmarkH1HeadsBody(b *testing.B) {
	var tp h1Heads
	tp.feed([]byte("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 9223372036854775807\r\n\r\n"))
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		tp.feed(buf)
	}
}
