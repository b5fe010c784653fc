package quicpeek

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/quic-go/quic-go"
)

// The fuzz input is a mode byte and 1 to 4 pieces, each but the last
// with a 2-byte length before it. In raw mode the pieces are datagrams, as
// the guest sends them; in sealed mode each is the plaintext frames of one
// Initial, sealed with the test encoder, so the fuzzer reaches the frame
// parser, the reassembly and the ClientHello parser behind the AEAD (which
// no mutation of a raw datagram gets past).
const (
	fuzzRaw    = 0
	fuzzSealed = 1 // bit 0; bit 1 picks QUIC v2
)

func fuzzJoin(mode byte, pieces ...[]byte) []byte {
	b := []byte{mode}
	for i, d := range pieces {
		if i < len(pieces)-1 {
			b = binary.BigEndian.AppendUint16(b, uint16(len(d)))
		}
		b = append(b, d...)
	}
	return b
}

// fuzzSplit is fuzzJoin's inverse.
func fuzzSplit(in []byte) (mode byte, pieces [][]byte) {
	if len(in) == 0 {
		return fuzzRaw, [][]byte{nil}
	}
	mode, in = in[0], in[1:]
	for len(pieces) < 3 && len(in) >= 2 {
		n := int(binary.BigEndian.Uint16(in))
		if n > len(in)-2 {
			break
		}
		pieces = append(pieces, in[2:2+n])
		in = in[2+n:]
	}
	return mode, append(pieces, in)
}

func FuzzQUICInitial(f *testing.F) {
	f.Add(fuzzJoin(fuzzRaw, unhex(f, rfc9001ClientInitial)))
	f.Add(fuzzJoin(fuzzRaw, unhex(f, rfc9369ClientInitial)))
	f.Add(fuzzJoin(fuzzRaw, captureQUICGo(f, quic.Version1, "a.test", "h3")...))
	f.Add(fuzzJoin(fuzzRaw, captureQUICGo(f, quic.Version2, "b.test", "h3")...))
	f.Add(fuzzJoin(fuzzRaw, captureQUICGo(f, quic.Version1, "c.test", bigALPN()...)[:3]...))
	ch := quicClientHello(f, "d.test", "h3")
	third := split(ch, 3)
	// Reordered and overlapping, as chromium sends them.
	scattered := [][]byte{
		cryptoFrame(uint64(len(ch)-len(third[2])), third[2]),
		concat(cryptoFrame(0, ch[:len(ch)/2]), []byte{framePing}, cryptoFrame(uint64(len(third[0])), ch[len(third[0]):])),
	}
	f.Add(fuzzJoin(fuzzRaw, initials(f, scattered...)...))
	f.Add(fuzzJoin(fuzzSealed, scattered...))
	f.Add(fuzzJoin(fuzzSealed|2, cryptoFrame(0, ch[:len(ch)/2]), concat([]byte{frameAck, 0, 0, 0, 0}, cryptoFrame(uint64(len(ch)/2), ch[len(ch)/2:]))))
	f.Fuzz(func(t *testing.T, in []byte) {
		p := New()
		var err error
		done := false
		mode, pieces := fuzzSplit(in)
		for i, d := range pieces {
			if mode&fuzzSealed != 0 {
				v := Version1
				if mode&2 != 0 {
					v = Version2
				}
				d = sealInitial(t, packet{version: v, pn: uint64(i), frames: d})
			}
			orig := slices.Clone(d)
			if done, err = p.Add(d); err != nil || done {
				if !slices.Equal(d, orig) {
					t.Fatal("Add modified its datagram")
				}
				break
			}
		}
		if cap(p.stream.buf) > MaxCryptoBytes || p.datagrams > MaxDatagrams {
			t.Fatalf("kept %d stream bytes over %d datagrams", cap(p.stream.buf), p.datagrams)
		}
		if err != nil {
			if d2, err2 := p.Add(in); d2 || err2 != err {
				t.Fatalf("Add after an error = %v, %v", d2, err2)
			}
			return
		}
		if !done {
			if p.Hello() != nil {
				t.Fatal("a Hello before done")
			}
			return
		}
		h := p.Hello()
		if h == nil || (h.Version != Version1 && h.Version != Version2) || len(h.DCID) < minInitialDCID {
			t.Fatalf("done with %+v", h)
		}
		for _, c := range []byte(h.ServerName) {
			if c <= ' ' || c >= 0x7f || (c >= 'A' && c <= 'Z') {
				t.Fatalf("server name %q has byte %q", h.ServerName, c)
			}
		}
		// Add after done is harmless: same answer, nothing read.
		if d2, err2 := p.Add(in); !d2 || err2 != nil || p.Hello() != h {
			t.Fatalf("Add after done = %v, %v", d2, err2)
		}
	})
}
