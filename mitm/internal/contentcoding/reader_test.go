package contentcoding

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	plain := sample()
	for _, c := range []struct {
		header string
		body   []byte
		why    string
	}{
		{"gzip", encode(t, "gzip", plain), "the usual coding"},
		{"deflate", encode(t, "deflate", plain), "zlib-wrapped deflate"},
		{"deflate", encode(t, "raw-deflate", plain), "raw deflate, which some servers send"},
		{"br", encode(t, "br", plain), "brotli"},
		{"zstd", encode(t, "zstd", plain), "zstd"},
		{"gzip, br", encode(t, "br", encode(t, "gzip", plain)), "two codings: the last applied is undone first"},
		{"identity", plain, "no coding"},
	} {
		r, err := NewReader(c.header, bytes.NewReader(c.body))
		if err != nil {
			t.Fatalf("%s (%s): %v", c.header, c.why, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%s (%s): %v, %d bytes of %d", c.header, c.why, err, len(got), len(plain))
		}
	}
	if _, err := NewReader("compress", strings.NewReader("x")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("compress: %v, want ErrUnsupported", err)
	}
	// A broken stream is a Read error, never a clean end: what follows the
	// break must not pass for the whole body.
	broken := encode(t, "gzip", plain)
	broken = append(broken[:len(broken)/2:len(broken)/2], bytes.Repeat([]byte{0xff}, 64)...)
	r, _ := NewReader("gzip", bytes.NewReader(broken))
	if _, err := io.ReadAll(r); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a broken gzip stream read as %v", err)
	}
	r, _ = NewReader("gzip", bytes.NewReader(nil))
	if got, err := io.ReadAll(r); err != nil || len(got) != 0 {
		t.Errorf("an empty body: %q %v", got, err)
	}
}
