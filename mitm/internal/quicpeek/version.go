package quicpeek

// The QUIC versions a peek understands.
const (
	Version1 uint32 = 0x00000001 // RFC 9000
	Version2 uint32 = 0x6b3343cf // RFC 9369
)

// versionParams is what differs between QUIC versions for Initial packets:
// the salt the Initial secret is extracted with, the HKDF labels of the
// packet protection keys, and the long-header type bits of an Initial.
type versionParams struct {
	salt                       []byte
	keyLabel, ivLabel, hpLabel string
	initialType                byte // long-header packet type bits (0x30 of byte 0, shifted down)
	zeroRTTType, handshakeType byte
}

var versions = map[uint32]*versionParams{
	Version1: {
		// RFC 9001 §5.2.
		salt:          []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a},
		keyLabel:      "quic key",
		ivLabel:       "quic iv",
		hpLabel:       "quic hp",
		initialType:   0b00,
		zeroRTTType:   0b01,
		handshakeType: 0b10,
	},
	Version2: {
		// RFC 9369 §3.3.1–§3.3.3.
		salt:          []byte{0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9},
		keyLabel:      "quicv2 key",
		ivLabel:       "quicv2 iv",
		hpLabel:       "quicv2 hp",
		initialType:   0b01,
		zeroRTTType:   0b10,
		handshakeType: 0b11,
	},
}
