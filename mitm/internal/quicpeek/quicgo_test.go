package quicpeek

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// captureQUICGo dials a UDP socket with quic-go's client and returns the
// datagrams it sends until they hold its whole ClientHello (as the peek
// reads them), at most MaxDatagrams. Nothing answers, so the dial fails
// once the test is done with it.
func captureQUICGo(t testing.TB, v quic.Version, name string, alpn ...string) [][]byte {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	dialed := make(chan struct{})
	go func() {
		defer close(dialed)
		conn, err := quic.DialAddr(ctx, pc.LocalAddr().String(), &tls.Config{ServerName: name, NextProtos: alpn}, &quic.Config{Versions: []quic.Version{v}})
		if err == nil {
			conn.CloseWithError(0, "")
		}
	}()
	defer func() { cancel(); <-dialed }()

	p := New()
	var got [][]byte
	buf := make([]byte, 64<<10)
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(got) < MaxDatagrams {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("reading quic-go's datagrams: %v", err)
		}
		got = append(got, bytes.Clone(buf[:n]))
		if done, err := p.Add(buf[:n]); err != nil {
			t.Fatalf("datagram %d of quic-go: %v", len(got), err)
		} else if done {
			return got
		}
	}
	t.Fatalf("no ClientHello in quic-go's first %d datagrams", len(got))
	return nil
}

// bigALPN is long enough to spread quic-go's ClientHello over three or
// more Initial datagrams.
func bigALPN() []string {
	var l []string
	for i := range 40 {
		l = append(l, "h3-capsem-test-protocol-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	return l
}

func TestQUICGoInitials(t *testing.T) {
	tests := []struct {
		version      quic.Version
		alpn         []string
		minDatagrams int
		why          string
	}{
		{quic.Version1, []string{"h3"}, 2, "quic-go v0.65.0's default X25519MLKEM768 key share makes its ClientHello ~1.3 KB+: two Initials"},
		{quic.Version2, []string{"h3"}, 2, "the same over QUIC v2: its own salt, labels and type bits"},
		{quic.Version1, bigALPN(), 3, "a large ALPN list spreads the ClientHello over three or more datagrams"},
	}
	for _, tc := range tests {
		ds := captureQUICGo(t, tc.version, "API.Example.test", tc.alpn...)
		if len(ds) < tc.minDatagrams {
			t.Errorf("%s: the ClientHello took %d datagrams, want at least %d", tc.why, len(ds), tc.minDatagrams)
		}
		if v, ok := IsInitial(ds[0]); !ok || v != uint32(tc.version) {
			t.Errorf("%s: IsInitial(first) = %#x, %v", tc.why, v, ok)
		}
		// Replaying the capture into a fresh peek gives the same answer.
		p := New()
		var done bool
		var err error
		for _, d := range ds {
			if done, err = p.Add(d); err != nil {
				t.Fatalf("%s: %v", tc.why, err)
			}
		}
		h := p.Hello()
		if !done || h.ServerName != "api.example.test" || !slices.Equal(h.ALPN, tc.alpn) || h.Version != uint32(tc.version) || len(h.DCID) < 8 || h.EarlyData {
			t.Errorf("%s: done %v, hello %+v", tc.why, done, h)
		}
	}
}
