package quicpeek

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
)

// initialKeys opens a client's Initial packets: AES-128-GCM for the
// payload and AES-128 (one ECB block) for header protection, the only
// cipher suite Initials use (RFC 9001 §5.2).
type initialKeys struct {
	aead cipher.AEAD
	iv   [12]byte
	hp   cipher.Block
}

// clientSecret derives the client's Initial secret from the Destination
// Connection ID of the client's first Initial (RFC 9001 §5.2).
func clientSecret(dcid []byte, v *versionParams) []byte {
	initial, err := hkdf.Extract(sha256.New, dcid, v.salt)
	if err != nil {
		return nil // not reached: HMAC-SHA256 takes any key length
	}
	return expandLabel(initial, "client in", sha256.Size)
}

func newInitialKeys(dcid []byte, v *versionParams) (*initialKeys, error) {
	secret := clientSecret(dcid, v)
	block, err := aes.NewCipher(expandLabel(secret, v.keyLabel, 16))
	if err != nil {
		return nil, errorf("deriving the Initial key: %v", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, errorf("deriving the Initial key: %v", err)
	}
	hp, err := aes.NewCipher(expandLabel(secret, v.hpLabel, 16))
	if err != nil {
		return nil, errorf("deriving the Initial header protection key: %v", err)
	}
	k := &initialKeys{aead: aead, hp: hp}
	copy(k.iv[:], expandLabel(secret, v.ivLabel, 12))
	return k, nil
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context
// (RFC 8446 §7.1), as QUIC uses it.
func expandLabel(secret []byte, label string, length int) []byte {
	info := make([]byte, 0, 2+1+6+len(label)+1)
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, 0) // empty context
	out, err := hkdf.Expand(sha256.New, secret, string(info), length)
	if err != nil {
		return make([]byte, length) // not reached: length is at most 32
	}
	return out
}

// nonce is the AEAD nonce of packet number pn: the IV XORed with the
// packet number, left-padded (RFC 9001 §5.3).
func (k *initialKeys) nonce(pn uint64) [12]byte {
	n := k.iv
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], pn)
	for i := range p {
		n[4+i] ^= p[i]
	}
	return n
}
