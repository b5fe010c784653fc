package netstack

import "encoding/binary"

// The QUIC versions whose Initial packets start a flow: QUIC v1 (RFC 9000)
// and v2 (RFC 9369). Any other version — a version negotiation probe, a
// draft, a future one — is not an Initial capsem can hand on, and is
// dropped like any other UDP.
const (
	quicV1 = 0x00000001
	quicV2 = 0x6b3343cf
)

// quicMinInitialDatagram is the smallest UDP payload that may carry a
// client's Initial: RFC 9000 §14.1 makes clients pad such datagrams to
// 1,200 bytes and servers discard smaller ones. It also keeps a flood of
// Initials from costing less to send than the flow state it asks for.
const quicMinInitialDatagram = 1200

// isQUICInitial reports whether a guest's UDP payload starts with a QUIC
// Initial packet of v1 or v2, looking at the long header only (RFC 9000
// §17.2.2): header form and fixed bit set, a known version, the Initial
// type (0b00 in v1, 0b01 in v2), a Destination Connection ID of 8 to 20
// bytes (a client's first DCID is at least 8, §7.2), a Source Connection
// ID of at most 20, then the token and the packet length, both fitting in
// the datagram. The payload itself is protected and not looked into: the
// flow's handler decrypts it (the MITM's QUIC peek, for the ClientHello).
func isQUICInitial(b []byte) bool {
	if len(b) < quicMinInitialDatagram || b[0]&0xc0 != 0xc0 {
		return false
	}
	typ := b[0] >> 4 & 3
	switch binary.BigEndian.Uint32(b[1:5]) {
	case quicV1:
		if typ != 0 {
			return false
		}
	case quicV2:
		if typ != 1 {
			return false
		}
	default:
		return false
	}
	rest := b[5:]
	dcid := int(rest[0])
	if dcid < 8 || dcid > 20 || len(rest) < 1+dcid+1 {
		return false
	}
	rest = rest[1+dcid:]
	scid := int(rest[0])
	if scid > 20 || len(rest) < 1+scid {
		return false
	}
	rest = rest[1+scid:]
	token, n := quicVarint(rest)
	if n == 0 || token > uint64(len(rest)-n) {
		return false
	}
	rest = rest[n+int(token):]
	length, n := quicVarint(rest)
	// The packet number (1 to 4 bytes) is inside length; what follows the
	// packet, if anything, is further coalesced packets or padding.
	return n > 0 && length >= 1 && length <= uint64(len(rest)-n)
}

// quicVarint decodes a QUIC variable-length integer (RFC 9000 §16) at the
// start of b: its value and its size, 0 when b is too short.
func quicVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	n := 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0
	}
	v := uint64(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n
}
