package quicpeek

// Frame types allowed in an Initial packet (RFC 9000 §12.4, Table 3).
// Only their one-byte encodings are accepted: a longer encoding of a
// frame type is one an endpoint may treat as a protocol violation.
const (
	framePadding         = 0x00
	framePing            = 0x01
	frameAck             = 0x02
	frameAckECN          = 0x03
	frameCrypto          = 0x06
	frameConnectionClose = 0x1c // the transport one; 0x1d is not allowed in Initials
)

// readFrames walks the frames of a decrypted Initial packet and hands the
// CRYPTO data to s.
func readFrames(frames []byte, s *cryptoStream) error {
	if len(frames) == 0 {
		// RFC 9000 §12.4: a packet with no frames is a PROTOCOL_VIOLATION.
		return errorf("an Initial packet holds no frames, a QUIC protocol violation")
	}
	r := reader{b: frames}
	for r.left() > 0 {
		typ := r.b[r.off]
		r.off++
		switch typ {
		case framePadding, framePing:
		case frameAck, frameAckECN:
			if !skipAck(&r, typ == frameAckECN) {
				return errorf("an ACK frame in an Initial packet runs past the packet")
			}
		case frameCrypto:
			off, ok1 := r.varint()
			n, ok2 := r.varint()
			data, ok3 := r.bytes(n)
			if !ok1 || !ok2 || !ok3 {
				return errorf("a CRYPTO frame in an Initial packet runs past the packet")
			}
			if err := s.write(off, data); err != nil {
				return err
			}
		case frameConnectionClose:
			code, ok1 := r.varint()
			_, ok2 := r.varint() // the frame type that caused it
			n, ok3 := r.varint()
			_, ok4 := r.bytes(n)
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return errorf("a CONNECTION_CLOSE frame in an Initial packet runs past the packet")
			}
			return errorf("the client closed the connection in its Initial (error code %#x) before its ClientHello was complete", code)
		default:
			return errorf("an Initial packet carries a frame of type %#02x; only PADDING, PING, ACK, CRYPTO and CONNECTION_CLOSE are allowed there (RFC 9000 §12.4)", typ)
		}
	}
	return nil
}

// skipAck reads past the body of an ACK frame (RFC 9000 §19.3). The
// range count is not trusted: every range costs at least two bytes, so
// the loop ends when the packet does.
func skipAck(r *reader, ecn bool) bool {
	var count uint64
	for i := range 4 { // Largest Acknowledged, ACK Delay, ACK Range Count, First ACK Range
		v, ok := r.varint()
		if !ok {
			return false
		}
		if i == 2 {
			count = v
		}
	}
	for ; count > 0; count-- {
		if _, ok := r.varint(); !ok { // Gap
			return false
		}
		if _, ok := r.varint(); !ok { // ACK Range Length
			return false
		}
	}
	if ecn {
		for range 3 { // ECT0, ECT1, ECN-CE counts
			if _, ok := r.varint(); !ok {
				return false
			}
		}
	}
	return true
}
