package quicpeek

// open removes header protection from the Initial packet pkt (h parsed
// from it) and decrypts it into scratch, returning the plaintext frames
// and the full packet number. pkt itself is left as it was: the caller
// replays it to the QUIC server. largest is the largest packet number
// opened so far, -1 before the first. *scratch is reused and grown to the
// packet's size, which a UDP datagram bounds at 64 KiB.
func (k *initialKeys) open(pkt []byte, h longHeader, largest int64, scratch *[]byte) (frames []byte, pn uint64, err error) {
	buf := append((*scratch)[:0], pkt[:h.end]...)
	*scratch = buf
	var mask [16]byte
	k.hp.Encrypt(mask[:], buf[h.pnOffset+4:h.pnOffset+4+16])
	buf[0] ^= mask[0] & 0x0f // long header: the low 4 bits are protected
	pnLen := int(buf[0]&0x03) + 1
	var truncated uint64
	for i := range pnLen {
		buf[h.pnOffset+i] ^= mask[1+i]
		truncated = truncated<<8 | uint64(buf[h.pnOffset+i])
	}
	pn = decodePacketNumber(largest, truncated, pnLen*8)
	header, sealed := buf[:h.pnOffset+pnLen], buf[h.pnOffset+pnLen:]
	nonce := k.nonce(pn)
	frames, err = k.aead.Open(sealed[:0], nonce[:], sealed, header)
	if err != nil {
		return nil, 0, errorf("an Initial packet does not decrypt with the keys its Destination Connection ID gives, so it is not a client's Initial or was corrupted")
	}
	// The reserved bits are zero once protection is off; anything else is
	// a PROTOCOL_VIOLATION (RFC 9000 §17.2).
	if buf[0]&0x0c != 0 {
		return nil, 0, errorf("an Initial packet has its reserved header bits set, a QUIC protocol violation")
	}
	return frames, pn, nil
}

// decodePacketNumber recovers a full packet number from its truncated
// encoding of bits bits, given the largest one seen (RFC 9000 §A.3).
func decodePacketNumber(largest int64, truncated uint64, bits int) uint64 {
	expected := uint64(largest + 1)
	win := uint64(1) << bits
	hwin := win / 2
	candidate := expected&^(win-1) | truncated
	switch {
	case candidate+hwin <= expected && candidate < 1<<62-win:
		return candidate + win
	case candidate > expected+hwin && candidate >= win:
		return candidate - win
	}
	return candidate
}
