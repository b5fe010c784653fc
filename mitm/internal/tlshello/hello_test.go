package tlshello

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// clientHello returns the bytes crypto/tls sends first for cfg.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		tls.Client(c, cfg).Handshake()
		c.Close()
	}()
	// Read the first record header and body, which hold the ClientHello.
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(s, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// refragment splits the handshake message in one record into records of
// at most n bytes each.
func refragment(rec []byte, n int) []byte {
	msg := rec[5:]
	var out []byte
	for len(msg) > 0 {
		k := min(n, len(msg))
		out = append(out, 22, rec[1], rec[2], byte(k>>8), byte(k))
		out = append(out, msg[:k]...)
		msg = msg[k:]
	}
	return out
}

func TestReadRealClientHello(t *testing.T) {
	rec := clientHello(t, &tls.Config{ServerName: "API.Anthropic.com", NextProtos: []string{"h2", "http/1.1"}})
	trailing := []byte("must not be read")
	r := bytes.NewReader(append(slices.Clone(rec), trailing...))
	h, raw, err := Read(r)
	if err != nil {
		t.Fatal(err)
	}
	if h.ServerName != "api.anthropic.com" || !slices.Equal(h.ALPN, []string{"h2", "http/1.1"}) || !h.TLS13 {
		t.Fatalf("got %+v", h)
	}
	if !bytes.Equal(raw, rec) {
		t.Fatal("raw bytes are not the record read")
	}
	if r.Len() != len(trailing) {
		t.Fatalf("read %d bytes past the ClientHello", len(trailing)-r.Len())
	}
}

func TestReadFragmentedClientHello(t *testing.T) {
	rec := clientHello(t, &tls.Config{ServerName: "example.test"})
	for _, n := range []int{1, 3, 4, 5, 100} {
		frag := refragment(rec, n)
		h, raw, err := Read(bytes.NewReader(frag))
		if err != nil {
			t.Fatalf("fragments of %d: %v", n, err)
		}
		if h.ServerName != "example.test" || h.ALPN != nil || !bytes.Equal(raw, frag) {
			t.Fatalf("fragments of %d: %+v", n, h)
		}
	}
}

func TestReadNoSNI(t *testing.T) {
	rec := clientHello(t, &tls.Config{InsecureSkipVerify: true})
	h, _, err := Read(bytes.NewReader(rec))
	if err != nil {
		t.Fatal(err)
	}
	if h.ServerName != "" {
		t.Fatalf("SNI %q from a hello without one", h.ServerName)
	}
}

func TestReadRejects(t *testing.T) {
	rec := clientHello(t, &tls.Config{ServerName: "x.test"})
	for name, in := range map[string][]byte{
		"http":          []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"ssh":           []byte("SSH-2.0-OpenSSH_9.2\r\n"),
		"zero record":   {22, 3, 1, 0, 0},
		"huge record":   {22, 3, 1, 0x50, 0},
		"server hello":  append([]byte{22, 3, 3, 0, 4}, 2, 0, 0, 0),
		"huge hello":    append([]byte{22, 3, 3, 0, 4}, 1, 0x10, 0, 0),
		"trailing data": append(slices.Clone(rec[:3]), append([]byte{byte((len(rec) - 4) >> 8), byte(len(rec) - 4)}, append(slices.Clone(rec[5:]), 0)...)...),
		"truncated":     rec[:len(rec)-1],
		"application":   {23, 3, 3, 0, 1, 0},
	} {
		if _, _, err := Read(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := Read(bytes.NewReader([]byte("GET / HTTP/1.1\r\n"))); !errors.Is(err, ErrNotTLS) {
		t.Errorf("http: %v, want ErrNotTLS", err)
	}
}

func TestReadBoundsTotalSize(t *testing.T) {
	// An endless stream of small handshake records must stop at the cap.
	rec := []byte{22, 3, 1, 0, 4, 1, 0x00, 0xff, 0xff} // hello of 65535 bytes announced
	stream := slices.Clone(rec)
	for len(stream) < 2*MaxHelloBytes {
		stream = append(stream, 22, 3, 1, 0x40, 0)
		stream = append(stream, make([]byte, 0x4000)...)
	}
	_, raw, err := Read(bytes.NewReader(stream))
	if err == nil {
		t.Fatal("accepted")
	}
	if len(raw) > MaxHelloBytes+2*maxRecordLen {
		t.Fatalf("read %d bytes before giving up", len(raw))
	}
}

func FuzzClientHello(f *testing.F) {
	f.Add(clientHello(f, &tls.Config{ServerName: "a.test", NextProtos: []string{"h2"}}))
	f.Add(clientHello(f, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}))
	f.Add(refragment(clientHello(f, &tls.Config{ServerName: "b.test"}), 7))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, raw, err := Read(bytes.NewReader(in))
		if !bytes.HasPrefix(in, raw) {
			t.Fatal("raw is not a prefix of the input")
		}
		if err != nil {
			return
		}
		// Reading what was consumed gives the same answer.
		h2, raw2, err := Read(bytes.NewReader(raw))
		if err != nil || !bytes.Equal(raw, raw2) || h.ServerName != h2.ServerName || !slices.Equal(h.ALPN, h2.ALPN) {
			t.Fatalf("re-read differs: %v", err)
		}
		for _, c := range []byte(h.ServerName) {
			if c <= ' ' || c >= 0x7f || (c >= 'A' && c <= 'Z') {
				t.Fatalf("server name %q has byte %q", h.ServerName, c)
			}
		}
	})
}
