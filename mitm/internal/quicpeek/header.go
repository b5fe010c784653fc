package quicpeek

import (
	"encoding/binary"
	"fmt"
)

const (
	// minInitialDatagram: a client pads every datagram that carries an
	// Initial to at least 1200 bytes, and a server discards smaller ones
	// (RFC 9000 §14.1; quic-go's server does).
	minInitialDatagram = 1200
	// minInitialDCID: a client's first Destination Connection ID is at
	// least 8 unpredictable bytes (RFC 9000 §7.2); quic-go's server drops
	// shorter ones.
	minInitialDCID = 8
	// maxConnIDLen: connection IDs in v1 and v2 are at most 20 bytes
	// (RFC 9000 §17.2).
	maxConnIDLen = 20
	// minProtectedLen: packet number (up to 4) plus the 16-byte header
	// protection sample that starts 4 bytes after the packet number's
	// offset (RFC 9001 §5.4.2). Shorter packets cannot be unprotected.
	minProtectedLen = 4 + 16

	formLong = 0x80
	// fixedBit is set in every packet of v1 and v2 (RFC 9000 §17.2). RFC
	// 9287 lets a client clear it only towards a server that advertised
	// grease_quic_bit, which quic-go (the MITM's QUIC server) does not.
	fixedBit = 0x40
)

func errorf(format string, a ...any) error {
	return fmt.Errorf("quicpeek: "+format, a...)
}

// longHeader is a long-header packet parsed with its header protection
// still on: its packet number and the low 4 bits of first are unknown.
type longHeader struct {
	first      byte
	version    uint32
	params     *versionParams
	typ        byte // packet type bits, version-specific (see versionParams)
	dcid, scid []byte
	pnOffset   int // offset of the (protected) packet number in the packet
	end        int // length of the packet: pnOffset plus its Length field
}

// parseLongHeader parses the long header at the start of b, for the
// versions in versions only. It checks every length against b.
func parseLongHeader(b []byte) (longHeader, error) {
	var h longHeader
	if len(b) < 7 {
		return h, errorf("a %d-byte packet is too short for a QUIC long header", len(b))
	}
	h.first = b[0]
	if h.first&formLong == 0 {
		return h, errorf("the packet has a short header (first byte %#02x); a client's first packets are long-header Initials", h.first)
	}
	if h.first&fixedBit == 0 {
		return h, errorf("the packet's fixed bit is clear (first byte %#02x), so it is not QUIC v1 or v2", h.first)
	}
	h.version = binary.BigEndian.Uint32(b[1:5])
	if h.params = versions[h.version]; h.params == nil {
		return h, errorf("QUIC version %#08x is not v1 or v2, the versions capsem intercepts", h.version)
	}
	h.typ = h.first >> 4 & 0b11
	r := reader{b: b, off: 5}
	var ok bool
	if h.dcid, ok = r.connID(); !ok {
		return h, errorf("the Destination Connection ID is longer than %d bytes or runs past the packet", maxConnIDLen)
	}
	if h.scid, ok = r.connID(); !ok {
		return h, errorf("the Source Connection ID is longer than %d bytes or runs past the packet", maxConnIDLen)
	}
	switch h.typ {
	case h.params.initialType:
		n, ok := r.varint()
		if !ok || n > uint64(r.left()) {
			return h, errorf("the Initial's token length runs past the packet")
		}
		r.off += int(n)
	case h.params.zeroRTTType, h.params.handshakeType:
	default:
		return h, errorf("the client sent a Retry packet, which only servers send")
	}
	n, ok := r.varint()
	if !ok || n > uint64(r.left()) {
		return h, errorf("the packet's Length field (%d) runs past the %d-byte datagram", n, len(b))
	}
	if n < minProtectedLen {
		return h, errorf("the packet's Length field (%d) is below the %d bytes header protection needs", n, minProtectedLen)
	}
	h.pnOffset = r.off
	h.end = r.off + int(n)
	return h, nil
}

// IsInitial reports whether datagram starts with a client's first QUIC
// Initial packet of a version capsem intercepts: long header, fixed bit,
// v1 or v2, the Initial type, a Destination Connection ID of 8 to 20
// bytes, lengths within the datagram, and the datagram padded to 1200
// bytes. It decrypts nothing and allocates nothing: a cheap test before a
// flow is handed on, not a proof (Add is).
func IsInitial(datagram []byte) (version uint32, ok bool) {
	if len(datagram) < minInitialDatagram {
		return 0, false
	}
	h, err := parseLongHeader(datagram)
	if err != nil || h.typ != h.params.initialType || len(h.dcid) < minInitialDCID {
		return 0, false
	}
	return h.version, true
}

// reader is a read position in a packet or frame payload.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

// varint reads a QUIC variable-length integer (RFC 9000 §16).
func (r *reader) varint() (uint64, bool) {
	if r.left() < 1 {
		return 0, false
	}
	n := 1 << (r.b[r.off] >> 6)
	if r.left() < n {
		return 0, false
	}
	v := uint64(r.b[r.off] & 0x3f)
	for i := 1; i < n; i++ {
		v = v<<8 | uint64(r.b[r.off+i])
	}
	r.off += n
	return v, true
}

// bytes returns the next n bytes.
func (r *reader) bytes(n uint64) ([]byte, bool) {
	if n > uint64(r.left()) {
		return nil, false
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v, true
}

// connID reads a length-prefixed connection ID of at most maxConnIDLen.
func (r *reader) connID() ([]byte, bool) {
	if r.left() < 1 || r.b[r.off] > maxConnIDLen {
		return nil, false
	}
	n := uint64(r.b[r.off])
	r.off++
	return r.bytes(n)
}
