package quicpeek

// MaxCryptoBytes bounds the Initial CRYPTO stream a peek reassembles, and
// so the ClientHello. Real ones are 0.3 to 2 KiB (chromium's and Go's
// X25519MLKEM768 key share is 1.2 KiB of it, session tickets add a few
// hundred bytes); 16 KiB is 8× the largest, and what a TLS record holds.
const MaxCryptoBytes = 16 << 10

const (
	handshakeTypeClientHello = 1
	handshakeHeaderLen       = 4 // type(1) length(3)
)

// cryptoStream reassembles the Initial CRYPTO stream from frames that may
// come in any order, overlap and repeat (chromium scatters and repeats
// them). Each byte is kept once; a byte received twice must be the same
// both times, or the peek and the QUIC server could each read a different
// ClientHello from the same packets.
type cryptoStream struct {
	buf  []byte                       // stream bytes [0, len(buf)); only those marked in have are real
	have *[MaxCryptoBytes / 64]uint64 // one bit per byte; 2 KiB, allocated by the first write
}

func (s *cryptoStream) write(off uint64, data []byte) error {
	if off > MaxCryptoBytes || uint64(len(data)) > MaxCryptoBytes-off {
		return errorf("CRYPTO data reaches byte %d of the Initial stream; capsem reads a ClientHello of at most %d bytes", off+uint64(len(data)), MaxCryptoBytes)
	}
	if len(data) == 0 {
		return nil // an empty frame carries nothing, wherever it points
	}
	end := int(off) + len(data)
	if s.have == nil {
		s.have = new([MaxCryptoBytes / 64]uint64)
	}
	if end > cap(s.buf) {
		// Doubling, but never past MaxCryptoBytes.
		b := make([]byte, end, min(max(end, 2*cap(s.buf)), MaxCryptoBytes))
		copy(b, s.buf)
		s.buf = b
	} else if end > len(s.buf) {
		s.buf = s.buf[:end]
	}
	for i, c := range data {
		j := int(off) + i
		w, bit := j/64, uint64(1)<<(j%64)
		if s.have[w]&bit != 0 {
			if s.buf[j] != c {
				return errorf("two CRYPTO frames carry different bytes at offset %d of the Initial stream; a client repeats the same bytes", j)
			}
			continue
		}
		s.have[w] |= bit
		s.buf[j] = c
	}
	return nil
}

// complete reports whether bytes [0, n) have all been received.
func (s *cryptoStream) complete(n int) bool {
	if n > len(s.buf) {
		return false
	}
	for w := 0; w < n/64; w++ {
		if s.have[w] != ^uint64(0) {
			return false
		}
	}
	if rem := n % 64; rem != 0 {
		mask := uint64(1)<<rem - 1
		return s.have[n/64]&mask == mask
	}
	return true
}

// clientHello returns the ClientHello's body (after its 4-byte handshake
// header) once the stream holds all of it, and nil before.
func (s *cryptoStream) clientHello() ([]byte, error) {
	if !s.complete(handshakeHeaderLen) {
		return nil, nil
	}
	if s.buf[0] != handshakeTypeClientHello {
		return nil, errorf("the Initial CRYPTO stream starts with TLS handshake message type %d, not a ClientHello", s.buf[0])
	}
	n := handshakeHeaderLen + (int(s.buf[1])<<16 | int(s.buf[2])<<8 | int(s.buf[3]))
	if n > MaxCryptoBytes {
		return nil, errorf("the ClientHello is %d bytes; capsem reads at most %d", n, MaxCryptoBytes)
	}
	if len(s.buf) > n {
		// A client sends nothing but its ClientHello at the Initial level
		// until the server has answered.
		return nil, errorf("CRYPTO data runs past the end of the %d-byte ClientHello", n)
	}
	if !s.complete(n) {
		return nil, nil
	}
	return s.buf[handshakeHeaderLen:n], nil
}
