package quicpeek

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"slices"
	"testing"
)

// A test-only encoder: it builds client Initial packets from frames, with
// keys derived as the peek derives them, so tests can send what real
// clients rarely do (reordered, repeated, conflicting or forbidden frames).
// Its own correctness rests on the RFC vectors and quic-go's captures,
// which the peek opens too.

var testDCID = []byte{0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04}

// packet describes one Initial for sealInitial.
type packet struct {
	version  uint32 // 0: Version1
	dcid     []byte // nil: testDCID
	pn       uint64
	frames   []byte
	size     int  // pad the packet with PADDING frames to this many bytes; 0: 1200
	reserved byte // reserved header bits to set (0x0c), to test their check
	typ      *byte
}

func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return binary.BigEndian.AppendUint16(b, uint16(v)|0x4000)
	case v < 1<<30:
		return binary.BigEndian.AppendUint32(b, uint32(v)|0x80000000)
	}
	return binary.BigEndian.AppendUint64(b, v|0xc0<<56)
}

func cryptoFrame(off uint64, data []byte) []byte {
	b := appendVarint(appendVarint([]byte{frameCrypto}, off), uint64(len(data)))
	return append(b, data...)
}

// sealInitial returns the protected packet p describes.
func sealInitial(t testing.TB, p packet) []byte {
	t.Helper()
	if p.version == 0 {
		p.version = Version1
	}
	if p.dcid == nil {
		p.dcid = testDCID
	}
	if p.size == 0 {
		p.size = minInitialDatagram
	}
	v := versions[p.version]
	typ := v.initialType
	if p.typ != nil {
		typ = *p.typ
	}
	const pnLen = 4
	hdr := []byte{0xc0 | typ<<4 | p.reserved | (pnLen - 1)}
	hdr = binary.BigEndian.AppendUint32(hdr, p.version)
	hdr = append(hdr, byte(len(p.dcid)))
	hdr = append(hdr, p.dcid...)
	hdr = append(hdr, 0) // empty Source Connection ID
	if typ == v.initialType {
		hdr = append(hdr, 0) // empty token
	}
	payload := slices.Clone(p.frames)
	lenLen := 2 // the Length field's varint: 2 bytes as clients send it, 4 for jumbo packets
	if max(p.size, len(payload)) > 16000 {
		lenLen = 4
	}
	fixed := len(hdr) + lenLen + pnLen + len(payload) + 16
	if pad := p.size - fixed; pad > 0 {
		payload = append(payload, make([]byte, pad)...)
	}
	length := pnLen + len(payload) + 16
	if lenLen == 2 {
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(length)|0x4000)
	} else {
		hdr = binary.BigEndian.AppendUint32(hdr, uint32(length)|0x80000000)
	}
	pnOffset := len(hdr)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(p.pn))
	k, err := newInitialKeys(p.dcid, v)
	if err != nil {
		t.Fatal(err)
	}
	nonce := k.nonce(p.pn)
	pkt := k.aead.Seal(hdr, nonce[:], payload, hdr)
	var mask [16]byte
	k.hp.Encrypt(mask[:], pkt[pnOffset+4:pnOffset+20])
	pkt[0] ^= mask[0] & 0x0f
	for i := range pnLen {
		pkt[pnOffset+i] ^= mask[1+i]
	}
	return pkt
}

// quicClientHello returns the ClientHello crypto/tls sends at QUIC's
// Initial level: TLS 1.3 only, with Go's default X25519MLKEM768 key share,
// so about 1.4 KB — more than one Initial holds.
func quicClientHello(t testing.TB, name string, alpn ...string) []byte {
	t.Helper()
	qc := tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{ServerName: name, NextProtos: alpn, MinVersion: tls.VersionTLS13}})
	qc.SetTransportParameters([]byte{0x0f, 0x00}) // initial_source_connection_id, empty
	if err := qc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	var ch []byte
	for e := qc.NextEvent(); e.Kind != tls.QUICNoEvent; e = qc.NextEvent() {
		if e.Kind == tls.QUICWriteData && e.Level == tls.QUICEncryptionLevelInitial {
			ch = append(ch, e.Data...)
		}
	}
	if len(ch) < handshakeHeaderLen || ch[0] != handshakeTypeClientHello {
		t.Fatalf("crypto/tls wrote %d bytes, not a ClientHello", len(ch))
	}
	return ch
}

// tcpClientHello returns the ClientHello handshake message (without its
// record header) crypto/tls sends over TCP for cfg.
func tcpClientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		tls.Client(c, cfg).Handshake()
		c.Close()
	}()
	hdr := make([]byte, 5)
	if _, err := readFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := readFull(s, body); err != nil {
		t.Fatal(err)
	}
	return body
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// withEarlyData returns ch with an empty early_data extension appended,
// its lengths fixed up. ch must carry no pre_shared_key (which must stay
// last); a fresh ClientHello does not.
func withEarlyData(t testing.TB, ch []byte) []byte {
	t.Helper()
	out := append(slices.Clone(ch), 0x00, 0x2a, 0x00, 0x00)
	n := int(out[1])<<16 | int(out[2])<<8 | int(out[3]) + 4
	out[1], out[2], out[3] = byte(n>>16), byte(n>>8), byte(n)
	// The extensions block is the last vector: find its length field by
	// walking the fixed part (version, random, session id, suites, compression).
	off := 4 + 2 + 32
	off += 1 + int(out[off])
	off += 2 + int(binary.BigEndian.Uint16(out[off:]))
	off += 1 + int(out[off])
	binary.BigEndian.PutUint16(out[off:], binary.BigEndian.Uint16(out[off:])+4)
	return out
}

// split cuts b into n pieces of near-equal size.
func split(b []byte, n int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, b[i*len(b)/n:(i+1)*len(b)/n])
	}
	return out
}
