package quicpeek

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// initials returns one datagram per frame list, packet numbers from 0.
func initials(t testing.TB, frameLists ...[]byte) [][]byte {
	var out [][]byte
	for i, f := range frameLists {
		out = append(out, sealInitial(t, packet{pn: uint64(i), frames: f}))
	}
	return out
}

func concat(bs ...[]byte) []byte { return slices.Concat(bs...) }

// zeroRTT returns a long-header 0-RTT packet of QUIC v1 to testDCID with
// n bytes of (unopenable) payload.
func zeroRTT(n int) []byte {
	b := []byte{0xc0 | versions[Version1].zeroRTTType<<4}
	b = binary.BigEndian.AppendUint32(b, Version1)
	b = append(b, byte(len(testDCID)))
	b = append(b, testDCID...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(n)|0x4000)
	return append(b, bytes.Repeat([]byte{0x5a}, n)...)
}

func TestPeek(t *testing.T) {
	ch := quicClientHello(t, "API.Example.test", "h3")
	if len(ch) < 1200 {
		t.Fatalf("crypto/tls's QUIC ClientHello is %d bytes; these cases assume it needs two Initials", len(ch))
	}
	half := len(ch) / 2
	thirds := split(ch, 3)
	o1, o2 := uint64(len(thirds[0])), uint64(len(thirds[0])+len(thirds[1]))
	conflicting := bytes.Clone(ch)
	conflicting[half+10] ^= 0xff
	bigHello := []byte{handshakeTypeClientHello, 0x00, 0x4e, 0x20}
	v2 := func(pn uint64, f []byte) []byte { return sealInitial(t, packet{version: Version2, pn: pn, frames: f}) }
	handshake := versions[Version1].handshakeType
	zrtt := versions[Version1].zeroRTTType
	smallInitial := func(f []byte) []byte { return sealInitial(t, packet{frames: f, size: 1}) }

	tests := []struct {
		name      string
		datagrams func() [][]byte
		err       string // substring of the error; "" for success
		early     bool
		why       string
	}{
		{"in order", func() [][]byte { return initials(t, cryptoFrame(0, ch[:half]), cryptoFrame(uint64(half), ch[half:])) }, "", false,
			"the ClientHello split over two Initials, as quic-go sends it"},
		{"reversed", func() [][]byte { return initials(t, cryptoFrame(uint64(half), ch[half:]), cryptoFrame(0, ch[:half])) }, "", false,
			"the second half first: offsets, not arrival, place the bytes"},
		{"scattered and repeated", func() [][]byte {
			return initials(t, concat(cryptoFrame(o2, thirds[2]), cryptoFrame(0, thirds[0])),
				concat(cryptoFrame(0, thirds[0]), cryptoFrame(o1, thirds[1]), cryptoFrame(o2, thirds[2])))
		}, "", false, "chromium scatters CRYPTO frames out of order and repeats them"},
		{"overlapping, same bytes", func() [][]byte {
			return initials(t, cryptoFrame(0, ch[:half+100]), cryptoFrame(uint64(half-100), ch[half-100:]))
		}, "", false,
			"overlaps that agree are a retransmission"},
		{"ping and ack", func() [][]byte {
			ack := []byte{frameAck, 0, 0, 1, 0, 0, 0}          // one extra range
			ackECN := []byte{frameAckECN, 0, 0, 0, 0, 1, 2, 3} // ECN counts
			return initials(t, concat([]byte{framePing}, ack, cryptoFrame(0, ch[:half])), concat(ackECN, cryptoFrame(uint64(half), ch[half:])))
		}, "", false, "PING and ACK frames are allowed in Initials and carry nothing to read"},
		{"coalesced 0-RTT", func() [][]byte {
			return [][]byte{concat(smallInitial(cryptoFrame(0, ch[:half])), zeroRTT(600)), sealInitial(t, packet{pn: 1, frames: cryptoFrame(uint64(half), ch[half:])})}
		}, "", false, "a 0-RTT packet coalesced after an Initial is skipped by its Length"},
		{"two Initials in one datagram", func() [][]byte {
			return [][]byte{concat(smallInitial(cryptoFrame(0, ch[:half])), sealInitial(t, packet{pn: 1, frames: cryptoFrame(uint64(half), ch[half:]), size: 1}))}
		}, "", false, "coalesced Initials are all read (in a 1.5 KB datagram)"},
		{"trailing zeros", func() [][]byte {
			return [][]byte{concat(smallInitial(cryptoFrame(0, ch[:half])), make([]byte, 900)), sealInitial(t, packet{pn: 1, frames: cryptoFrame(uint64(half), ch[half:])})}
		}, "", false, "bytes after the last packet that are not a packet are ignored, as a server ignores them"},
		{"empty CRYPTO frame far out", func() [][]byte {
			return initials(t, concat(cryptoFrame(9000, nil), cryptoFrame(0, ch[:half])), cryptoFrame(uint64(half), ch[half:]))
		}, "", false, "an empty frame carries no data, so it does not extend the stream past the ClientHello"},
		{"v2", func() [][]byte {
			return [][]byte{v2(0, cryptoFrame(0, ch[:half])), v2(1, cryptoFrame(uint64(half), ch[half:]))}
		}, "", false,
			"QUIC v2 Initials, with v2's salt, labels and type bits"},
		{"early data", func() [][]byte {
			e := withEarlyData(t, ch)
			return initials(t, cryptoFrame(0, e[:half]), cryptoFrame(uint64(half), e[half:]))
		}, "", true, "a ClientHello offering 0-RTT is reported, so the MITM can refuse it"},

		{"conflicting overlap", func() [][]byte {
			return initials(t, cryptoFrame(0, ch[:half+100]), cryptoFrame(uint64(half-100), conflicting[half-100:]))
		}, "different bytes at offset", false, "two versions of the same bytes could give the peek one SNI and the server another"},
		{"truncated", func() [][]byte { return [][]byte{unhex(t, rfc9001ClientInitial)[:1100]} }, "runs past the 1100-byte datagram", false,
			"a packet cut short by its datagram"},
		{"wrong version", func() [][]byte {
			d := unhex(t, rfc9001ClientInitial)
			binary.BigEndian.PutUint32(d[1:], 0xff00001d)
			return [][]byte{d}
		}, "0xff00001d is not v1 or v2", false, "draft-29 and other versions are not intercepted"},
		{"handshake first", func() [][]byte {
			return [][]byte{sealInitial(t, packet{typ: &handshake, frames: cryptoFrame(0, ch[:half])})}
		}, "Handshake packet, not an Initial", false,
			"a client's first packets are Initials"},
		{"0-RTT first", func() [][]byte {
			return [][]byte{sealInitial(t, packet{typ: &zrtt, frames: cryptoFrame(0, ch[:half])})}
		}, "0-RTT packet, not an Initial", false,
			"0-RTT cannot come before the Initials"},
		{"short header", func() [][]byte { return [][]byte{append([]byte{0x40}, make([]byte, 1300)...)} }, "short header", false,
			"1-RTT packets before any handshake"},
		{"garbage", func() [][]byte { return [][]byte{bytes.Repeat([]byte("\xffgarbage"), 200)} }, "QUIC version", false,
			"bytes that only look like a long header"},
		{"tiny", func() [][]byte { return [][]byte{{0xc0, 0, 0}} }, "too short for a QUIC long header", false,
			"a datagram too short to hold a header"},
		{"unpadded", func() [][]byte {
			return [][]byte{sealInitial(t, packet{frames: cryptoFrame(0, ch[:half]), size: 1000})}
		}, "at least 1200", false,
			"a server drops Initial datagrams under 1200 bytes (RFC 9000 §14.1)"},
		{"short DCID", func() [][]byte {
			return [][]byte{sealInitial(t, packet{dcid: []byte{1, 2, 3, 4}, frames: cryptoFrame(0, ch[:half])})}
		}, "at least 8", false,
			"a client's first DCID is 8 bytes or more (RFC 9000 §7.2)"},
		{"STREAM frame", func() [][]byte { return initials(t, concat(cryptoFrame(0, ch[:half]), []byte{0x08, 0, 1, 'x'})) }, "frame of type 0x08", false,
			"STREAM is a protocol violation in an Initial"},
		{"application close", func() [][]byte { return initials(t, []byte{0x1d, 0, 0}) }, "frame of type 0x1d", false,
			"the application CONNECTION_CLOSE is not allowed in Initials"},
		{"non-minimal frame type", func() [][]byte { return initials(t, concat([]byte{0x40}, cryptoFrame(0, ch[:half]))) }, "frame of type 0x40", false,
			"a two-byte encoding of a frame type is refused, not decoded"},
		{"connection close", func() [][]byte { return initials(t, []byte{frameConnectionClose, 0x0a, 0, 3, 'b', 'y', 'e'}) }, "closed the connection", false,
			"the client gave up"},
		{"no frames", func() [][]byte { return [][]byte{concat(smallInitial(nil), make([]byte, 1200))} }, "no frames", false,
			"a packet without frames is a protocol violation (RFC 9000 §12.4)"},
		{"crypto past 16 KiB", func() [][]byte { return initials(t, cryptoFrame(16000, make([]byte, 1000))) }, "at most 16384", false,
			"the reassembly buffer is bounded"},
		{"huge crypto offset", func() [][]byte { return initials(t, cryptoFrame(1<<62-1, []byte{1})) }, "at most 16384", false,
			"an offset near 2^62 must not overflow or allocate"},
		{"ClientHello over 16 KiB", func() [][]byte { return initials(t, cryptoFrame(0, bigHello)) }, "20004 bytes", false,
			"a ClientHello's declared length is bounded before waiting for it"},
		{"data after the ClientHello", func() [][]byte {
			return initials(t, cryptoFrame(0, ch[:half]), cryptoFrame(uint64(half), append(bytes.Clone(ch[half:]), 0x14)))
		}, "runs past the end", false, "a client sends only its ClientHello at the Initial level"},
		{"not a ClientHello", func() [][]byte { return initials(t, cryptoFrame(0, []byte{2, 0, 0, 1, 0})) }, "type 2, not a ClientHello", false,
			"a ServerHello from a client"},
		{"malformed ClientHello", func() [][]byte { return initials(t, cryptoFrame(0, []byte{1, 0, 0, 5, 3, 3, 0, 0, 0})) }, "malformed", false,
			"the reassembled message goes through tlshello.Parse"},
		{"TLS 1.2 only", func() [][]byte {
			return initials(t, cryptoFrame(0, tcpClientHello(t, &tls.Config{ServerName: "a.test", MaxVersion: tls.VersionTLS12})))
		}, "TLS 1.3", false, "QUIC requires TLS 1.3 (RFC 9001 §4.2)"},
		{"DCID changes", func() [][]byte {
			return [][]byte{sealInitial(t, packet{frames: cryptoFrame(0, ch[:half])}), sealInitial(t, packet{pn: 1, dcid: bytes.Repeat([]byte{7}, 8), frames: cryptoFrame(uint64(half), ch[half:])})}
		}, "connection ID", false, "a client keeps its first DCID until the server answers, and the keys come from it"},
		{"version changes", func() [][]byte {
			return [][]byte{sealInitial(t, packet{frames: cryptoFrame(0, ch[:half])}), v2(1, cryptoFrame(uint64(half), ch[half:]))}
		}, "QUIC version 0x6b3343cf", false, "a client does not switch versions before the server answers"},
		{"bad tag", func() [][]byte {
			d := unhex(t, rfc9001ClientInitial)
			d[len(d)-1] ^= 1
			return [][]byte{d}
		}, "does not decrypt", false, "a corrupted packet fails authentication"},
		{"reserved bits", func() [][]byte {
			return [][]byte{sealInitial(t, packet{reserved: 0x04, frames: cryptoFrame(0, ch[:half])})}
		}, "reserved header bits", false,
			"reserved bits set after unprotection are a protocol violation"},
		{"too many datagrams", func() [][]byte {
			var ds [][]byte
			for i := range MaxDatagrams + 1 {
				ds = append(ds, sealInitial(t, packet{pn: uint64(i), frames: []byte{framePing}}))
			}
			return ds
		}, "first 8 datagrams", false, "a client that never completes its ClientHello is given up on"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			var done bool
			var err error
			for _, d := range tc.datagrams() {
				if done, err = p.Add(d); err != nil || done {
					break
				}
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "quicpeek: ") {
					t.Fatalf("%s: err = %v, want one containing %q", tc.why, err, tc.err)
				}
				if p.Hello() != nil {
					t.Fatalf("%s: a Hello after an error", tc.why)
				}
				return
			}
			if err != nil || !done {
				t.Fatalf("%s: done %v, err %v", tc.why, done, err)
			}
			h := p.Hello()
			if h.ServerName != "api.example.test" || !slices.Equal(h.ALPN, []string{"h3"}) || h.EarlyData != tc.early {
				t.Fatalf("%s: got %+v", tc.why, h)
			}
		})
	}
}

func TestAddAfterDoneIsHarmless(t *testing.T) {
	p := New()
	if done, err := p.Add(unhex(t, rfc9001ClientInitial)); !done || err != nil {
		t.Fatal(done, err)
	}
	h := p.Hello()
	for _, d := range [][]byte{nil, []byte("garbage"), unhex(t, rfc9369ClientInitial)} {
		if done, err := p.Add(d); !done || err != nil || p.Hello() != h {
			t.Fatalf("Add after done = %v, %v", done, err)
		}
	}
	if h.ServerName != "example.com" || h.Version != Version1 {
		t.Fatalf("hello changed: %+v", h)
	}
}

func TestErrorIsSticky(t *testing.T) {
	p := New()
	_, first := p.Add([]byte("garbage"))
	if first == nil {
		t.Fatal("garbage accepted")
	}
	// A valid Initial after the error does not revive the peek: the flow
	// already held something that was not QUIC.
	if done, err := p.Add(unhex(t, rfc9001ClientInitial)); done || err != first {
		t.Fatalf("Add after an error = %v, %v; want the first error again", done, err)
	}
}

func TestNoSNI(t *testing.T) {
	ch := quicClientHello(t, "192.0.2.1", "h3") // an IP address is not sent as SNI
	p := New()
	for _, d := range initials(t, cryptoFrame(0, ch[:len(ch)/2]), cryptoFrame(uint64(len(ch)/2), ch[len(ch)/2:])) {
		if _, err := p.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	if h := p.Hello(); h == nil || h.ServerName != "" {
		t.Fatalf("got %+v, want a Hello with no server name (the MITM decides what that means)", h)
	}
}

func TestIsInitial(t *testing.T) {
	rfc := unhex(t, rfc9001ClientInitial)
	handshake := versions[Version1].handshakeType
	withByte := func(i int, b byte) []byte { d := bytes.Clone(rfc); d[i] = b; return d }
	tests := []struct {
		name    string
		d       []byte
		version uint32
		why     string
	}{
		{"rfc v1", rfc, Version1, "RFC 9001 A.2"},
		{"rfc v2", unhex(t, rfc9369ClientInitial), Version2, "RFC 9369 A.2"},
		{"padded past the packet", append(bytes.Clone(rfc), make([]byte, 200)...), Version1, "trailing bytes after the Initial are allowed"},
		{"short", rfc[:1199], 0, "under 1200 bytes"},
		{"short header", withByte(0, 0x40), 0, "not a long header"},
		{"no fixed bit", withByte(0, 0x80), 0, "fixed bit clear"},
		{"unknown version", withByte(4, 0x02), 0, "version 0x00000002 does not exist"},
		{"v2 type bits on v1", withByte(0, 0xd0), 0, "0b01 is 0-RTT in v1"},
		{"handshake", sealInitial(t, packet{typ: &handshake}), 0, "a Handshake packet"},
		{"short DCID", sealInitial(t, packet{dcid: []byte{1, 2, 3}}), 0, "DCID under 8 bytes"},
		{"DCID over 20", withByte(5, 21), 0, "connection IDs are at most 20 bytes"},
		{"length past the datagram", withByte(16, 0x7f), 0, "Length field larger than the datagram"},
	}
	for _, tc := range tests {
		v, ok := IsInitial(tc.d)
		if v != tc.version || ok != (tc.version != 0) {
			t.Errorf("%s (%s): IsInitial = %#x, %v", tc.name, tc.why, v, ok)
		}
	}
}

func TestDecodePacketNumber(t *testing.T) {
	tests := []struct {
		largest   int64
		truncated uint64
		bits      int
		want      uint64
		why       string
	}{
		{0xa82f30ea, 0x9b32, 16, 0xa82f9b32, "RFC 9000 A.3's example"},
		{-1, 2, 32, 2, "the first packet: RFC 9001 A.2's packet number"},
		{-1, 0, 8, 0, "the first packet, one byte"},
		{255, 0x01, 8, 0x101, "wraps forward past the window"},
	}
	for _, tc := range tests {
		if got := decodePacketNumber(tc.largest, tc.truncated, tc.bits); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.why, got, tc.want)
		}
	}
}

// TestMemoryIsBounded sends what makes a peek keep the most: CRYPTO data
// up to the 16 KiB bound in the largest datagrams, then more datagrams.
func TestMemoryIsBounded(t *testing.T) {
	p := New()
	chunk := 1000
	var err error
	for i := range MaxDatagrams + 1 {
		off := uint64((MaxCryptoBytes - chunk) - i*chunk)
		if _, err = p.Add(sealInitial(t, packet{pn: uint64(i), frames: cryptoFrame(off, make([]byte, chunk)), size: 60000})); err != nil {
			break
		}
		if cap(p.stream.buf) > MaxCryptoBytes || cap(p.scratch) > 64<<10 {
			t.Fatalf("kept %d bytes of stream, %d of scratch", cap(p.stream.buf), cap(p.scratch))
		}
	}
	if err == nil || !strings.Contains(err.Error(), "first 8 datagrams") || len(p.stream.buf) != MaxCryptoBytes {
		t.Fatalf("err %v after %d stream bytes; want the datagram bound reached with the stream full", err, len(p.stream.buf))
	}
}
