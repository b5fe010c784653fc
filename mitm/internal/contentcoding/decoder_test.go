package contentcoding

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// syncBuffer is a bytes.Buffer safe to read while the decoder writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// encoder returns a writer that applies coding to what is written to w.
func encoder(t testing.TB, coding string, w io.Writer) interface {
	io.WriteCloser
	Flush() error
} {
	t.Helper()
	switch coding {
	case "gzip", "x-gzip":
		return gzip.NewWriter(w)
	case "deflate":
		return zlib.NewWriter(w)
	case "raw-deflate":
		fw, _ := flate.NewWriter(w, flate.DefaultCompression)
		return fw
	case "br":
		return brotli.NewWriter(w)
	case "zstd":
		zw, err := zstd.NewWriter(w)
		if err != nil {
			t.Fatal(err)
		}
		return zw
	}
	t.Fatalf("no encoder for %q", coding)
	return nil
}

func encode(t testing.TB, coding string, plain []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := encoder(t, coding, &b)
	w.Write(plain)
	w.Close()
	return b.Bytes()
}

func sample() []byte {
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, "data: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"text\":\"token %d\"}}\n\n", i%3, i)
	}
	return []byte(b.String())
}

// headerName maps the test's coding names to Content-Encoding values.
func headerName(c string) string {
	if c == "raw-deflate" {
		return "deflate"
	}
	return c
}

func decodeChunks(t *testing.T, header string, chunks [][]byte, limit int64) (string, error) {
	t.Helper()
	var out syncBuffer
	d, err := NewDecoder(header, &out, limit)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if n, err := d.Write(c); n != len(c) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	err = d.Close()
	return out.String(), err
}

func TestRoundTrip(t *testing.T) {
	plain := sample()
	for _, coding := range []string{"gzip", "x-gzip", "deflate", "raw-deflate", "br", "zstd"} {
		t.Run(coding, func(t *testing.T) {
			enc := encode(t, coding, plain)
			got, err := decodeChunks(t, headerName(coding), [][]byte{enc}, 0)
			if err != nil || got != string(plain) {
				t.Fatalf("one write: err %v, %d bytes of %d", err, len(got), len(plain))
			}
			// One byte at a time.
			chunks := make([][]byte, len(enc))
			for i := range enc {
				chunks[i] = enc[i : i+1]
			}
			if got, err := decodeChunks(t, headerName(coding), chunks, 0); err != nil || got != string(plain) {
				t.Fatalf("byte by byte: err %v, %d bytes of %d", err, len(got), len(plain))
			}
			// Random cuts.
			r := rand.New(rand.NewPCG(1, uint64(len(enc))))
			for round := 0; round < 20; round++ {
				var chunks [][]byte
				for rest := enc; len(rest) > 0; {
					k := min(len(rest), r.IntN(300))
					chunks = append(chunks, rest[:k])
					rest = rest[k:]
				}
				if got, err := decodeChunks(t, headerName(coding), chunks, 0); err != nil || got != string(plain) {
					t.Fatalf("random cuts: err %v, %d bytes of %d", err, len(got), len(plain))
				}
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	for _, h := range []string{"", "identity", " Identity ", "identity, identity"} {
		got, err := decodeChunks(t, h, [][]byte{[]byte("hel"), []byte("lo")}, 0)
		if err != nil || got != "hello" {
			t.Errorf("%q: %q, %v", h, got, err)
		}
	}
	got, err := decodeChunks(t, "", [][]byte{[]byte("hello"), []byte("world")}, 7)
	if got != "hellowo" || !errors.Is(err, ErrLimit) {
		t.Errorf("identity over the limit: %q, %v", got, err)
	}
}

func TestCaseAndList(t *testing.T) {
	plain := sample()
	got, err := decodeChunks(t, "GZip", [][]byte{encode(t, "gzip", plain)}, 0)
	if err != nil || got != string(plain) {
		t.Fatalf("GZip: %v", err)
	}
	// "gzip, br": gzip was applied first, then br.
	both := encode(t, "br", encode(t, "gzip", plain))
	got, err = decodeChunks(t, "gzip, br", [][]byte{both[:100], both[100:]}, 0)
	if err != nil || got != string(plain) {
		t.Fatalf("gzip, br: err %v, %d bytes", err, len(got))
	}
	three := encode(t, "zstd", encode(t, "deflate", encode(t, "gzip", plain)))
	got, err = decodeChunks(t, "gzip,identity, deflate ,zstd", [][]byte{three}, 0)
	if err != nil || got != string(plain) {
		t.Fatalf("three codings: err %v, %d bytes", err, len(got))
	}
}

func TestUnsupported(t *testing.T) {
	for _, h := range []string{"compress", "x-compress", "gzip, foo", "sdch"} {
		if _, err := NewDecoder(h, io.Discard, 0); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%q: %v", h, err)
		}
		if Supported(h) {
			t.Errorf("Supported(%q)", h)
		}
	}
	if !Supported("br") || !Supported("") {
		t.Error("Supported refuses a known coding")
	}
}

func TestEmptyBody(t *testing.T) {
	for _, c := range []string{"gzip", "deflate", "br", "zstd"} {
		got, err := decodeChunks(t, c, nil, 0)
		if got != "" || err != nil {
			t.Errorf("%s: %q, %v", c, got, err)
		}
	}
}

// TestStreams checks that decoded bytes reach the destination while the body
// is still streaming, before Close.
func TestStreams(t *testing.T) {
	for _, coding := range []string{"gzip", "deflate", "br", "zstd"} {
		t.Run(coding, func(t *testing.T) {
			var wire bytes.Buffer
			enc := encoder(t, coding, &wire)
			var out syncBuffer
			d, err := NewDecoder(coding, &out, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			var want string
			for i := 0; i < 5; i++ {
				msg := fmt.Sprintf("data: event %d\n\n", i)
				want += msg
				enc.Write([]byte(msg))
				enc.Flush()
				d.Write(wire.Bytes())
				wire.Reset()
				deadline := time.Now().Add(5 * time.Second)
				for out.String() != want {
					if time.Now().After(deadline) {
						t.Fatalf("after event %d the destination has %q", i, out.String())
					}
					time.Sleep(time.Millisecond)
				}
			}
			enc.Close()
			d.Write(wire.Bytes())
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCorruptNeverBlocks(t *testing.T) {
	plain := sample()
	junk := bytes.Repeat([]byte{0xA5, 0x00, 0xFF, 0x13}, 1<<18) // 1 MiB
	for _, coding := range []string{"gzip", "deflate", "br", "zstd"} {
		t.Run(coding, func(t *testing.T) {
			enc := encode(t, coding, plain)
			// A valid start, then garbage in the middle of the stream.
			bad := append(append([]byte{}, enc[:len(enc)/2]...), junk...)
			var out syncBuffer
			d, _ := NewDecoder(coding, &out, 0)
			done := make(chan error, 1)
			go func() {
				for i := 0; i < 16; i++ { // 16 MiB after the damage
					d.Write(bad)
				}
				done <- d.Close()
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Close reported no error for a corrupt stream")
				}
				// Garbage can decode as deflate blocks for a while, so
				// the output is not checked, only that it is bounded.
				if len(out.String()) > 64<<20 {
					t.Fatal("output beyond the limit")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Write or Close blocked on a corrupt stream")
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	plain := sample()
	for _, coding := range []string{"gzip", "deflate", "br", "zstd"} {
		enc := encode(t, coding, plain)
		got, err := decodeChunks(t, coding, [][]byte{enc[:len(enc)-len(enc)/3]}, 0)
		if err == nil {
			t.Errorf("%s: a truncated stream closed without error", coding)
		}
		if !strings.HasPrefix(string(plain), got) {
			t.Errorf("%s: the partial output is not a prefix of the body", coding)
		}
	}
}

func TestTrailingData(t *testing.T) {
	plain := []byte("hello")
	for _, coding := range []string{"br", "deflate"} {
		enc := encode(t, coding, plain)
		got, err := decodeChunks(t, coding, [][]byte{enc, []byte("trailing junk")}, 0)
		if got != "hello" {
			t.Errorf("%s: %q", coding, got)
		}
		if err == nil {
			t.Errorf("%s: trailing data not reported", coding)
		}
	}
}

func TestBombStopsAtLimit(t *testing.T) {
	const limit = 1 << 20
	for _, coding := range []string{"gzip", "deflate", "br", "zstd"} {
		t.Run(coding, func(t *testing.T) {
			var wire bytes.Buffer
			enc := encoder(t, coding, &wire)
			zeros := make([]byte, 1<<20)
			for i := 0; i < 64; i++ { // 64 MiB of zeros
				enc.Write(zeros)
			}
			enc.Close()
			var n countWriter
			d, _ := NewDecoder(coding, &n, limit)
			start := time.Now()
			d.Write(wire.Bytes())
			d.Write(wire.Bytes()) // swallowed
			err := d.Close()
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("Close = %v, want ErrLimit", err)
			}
			if n != limit || d.Decoded() != limit {
				t.Fatalf("wrote %d (Decoded %d), limit %d", n, d.Decoded(), limit)
			}
			t.Logf("%d compressed bytes stopped at the limit in %v", wire.Len(), time.Since(start))
		})
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 0, errors.New("parser full") }

func TestDestinationError(t *testing.T) {
	enc := encode(t, "gzip", sample())
	d, _ := NewDecoder("gzip", failWriter{}, 0)
	for i := 0; i < 100; i++ {
		d.Write(enc)
	}
	if err := d.Close(); err == nil || !strings.Contains(err.Error(), "parser full") {
		t.Fatalf("Close = %v", err)
	}
	d, _ = NewDecoder("", failWriter{}, 0)
	d.Write([]byte("x"))
	if err := d.Close(); err == nil {
		t.Fatal("identity: the destination's error was lost")
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	enc := encode(t, "zstd", sample())
	for i := 0; i < 50; i++ {
		d, _ := NewDecoder("gzip, br, zstd", io.Discard, 0)
		d.Write(enc[:len(enc)/2])
		d.Close()
		d.Close()    // twice is fine
		d.Write(enc) // after Close: ignored
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func BenchmarkGzip(b *testing.B) {
	plain := sample()
	enc := encode(b, "gzip", plain)
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		d, _ := NewDecoder("gzip", io.Discard, 0)
		for off := 0; off < len(enc); off += 1400 {
			d.Write(enc[off:min(off+1400, len(enc))])
		}
		d.Close()
	}
}

// FuzzDecoder feeds arbitrary bytes, in two writes, to each decoder: it must
// not panic, not hang, and never write more than the limit.
func FuzzDecoder(f *testing.F) {
	for i, c := range []string{"gzip", "deflate", "br", "zstd", "raw-deflate"} {
		f.Add(uint8(i), encode(f, c, []byte("data: hello\n\n")), uint16(3))
	}
	f.Add(uint8(0), []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, uint16(1))
	codings := []string{"gzip", "deflate", "br", "zstd", "gzip, br", ""}
	f.Fuzz(func(t *testing.T, which uint8, in []byte, cut uint16) {
		const limit = 1 << 16
		var n countWriter
		d, err := NewDecoder(codings[int(which)%len(codings)], &n, limit)
		if err != nil {
			t.Fatal(err)
		}
		k := int(cut) % (len(in) + 1)
		d.Write(in[:k])
		d.Write(in[k:])
		d.Close()
		if n > limit {
			t.Fatalf("wrote %d bytes, limit %d", n, limit)
		}
	})
}
