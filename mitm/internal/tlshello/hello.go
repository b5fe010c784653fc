package tlshello

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxHelloBytes bounds the ClientHello handshake message. Real ones are a
// few hundred bytes to ~2 KiB (post-quantum key shares); padding extensions
// push some to 512 B; nothing legitimate comes near this.
const MaxHelloBytes = 64 << 10

const (
	recordHeaderLen   = 5
	maxRecordLen      = 1 << 14
	recordTypeHS      = 22
	handshakeTypeCH   = 1
	extServerName     = 0
	extALPN           = 16
	extEarlyData      = 42
	extSupportedVers  = 43
	sniTypeHostName   = 0
	handshakeHeadrLen = 4
)

// Hello holds what the MITM needs from a ClientHello.
type Hello struct {
	ServerName string   // SNI host_name, lowered; empty when absent
	ALPN       []string // offered application protocols, in order
	TLS13      bool     // the client offers TLS 1.3 (supported_versions)
	EarlyData  bool     // the client offers 0-RTT data (early_data, RFC 8446 §4.2.10)
}

// Errors a caller may want to tell apart.
var (
	ErrNotTLS   = errors.New("not a TLS handshake")
	ErrTooLarge = errors.New("ClientHello too large")
)

// Read reads whole TLS records from r until it holds the complete
// ClientHello, and returns it parsed along with every byte it read (to be
// replayed). It never reads beyond the record that ends the ClientHello.
func Read(r io.Reader) (*Hello, []byte, error) {
	var raw []byte // every byte read, records and headers
	var msg []byte // the handshake message, reassembled from records
	for {
		var hdr [recordHeaderLen]byte
		if k, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, append(raw, hdr[:k]...), fmt.Errorf("reading TLS record header: %w", err)
		}
		raw = append(raw, hdr[:]...)
		if hdr[0] != recordTypeHS || hdr[1] != 3 {
			return nil, raw, ErrNotTLS
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || n > maxRecordLen {
			return nil, raw, fmt.Errorf("%w: record length %d", ErrNotTLS, n)
		}
		if len(msg)+n > MaxHelloBytes+handshakeHeadrLen {
			return nil, raw, ErrTooLarge
		}
		start := len(raw)
		raw = append(raw, make([]byte, n)...)
		if k, err := io.ReadFull(r, raw[start:]); err != nil {
			return nil, raw[:start+k], fmt.Errorf("reading TLS record: %w", err)
		}
		msg = append(msg, raw[start:]...)
		if len(msg) < handshakeHeadrLen {
			continue
		}
		if msg[0] != handshakeTypeCH {
			return nil, raw, fmt.Errorf("%w: first handshake message is type %d, not ClientHello", ErrNotTLS, msg[0])
		}
		want := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if want > MaxHelloBytes {
			return nil, raw, ErrTooLarge
		}
		if len(msg)-handshakeHeadrLen < want {
			continue
		}
		if len(msg)-handshakeHeadrLen > want {
			// A record holding more than the ClientHello: no client sends
			// this before the server has spoken.
			return nil, raw, fmt.Errorf("%w: data after the ClientHello", ErrNotTLS)
		}
		h, err := Parse(msg[handshakeHeadrLen:])
		return h, raw, err
	}
}

// Parse parses the body of a ClientHello handshake message (after the
// 4-byte handshake header).
func Parse(body []byte) (*Hello, error) {
	s := cursor(body)
	var ok bool
	// legacy_version(2) random(32)
	if !s.skip(2 + 32) {
		return nil, errShort("version/random")
	}
	var sessionID, suites, compression cursor
	if sessionID, ok = s.vec8(); !ok || len(sessionID) > 32 {
		return nil, errShort("session id")
	}
	if suites, ok = s.vec16(); !ok || len(suites) == 0 || len(suites)%2 != 0 {
		return nil, errShort("cipher suites")
	}
	if compression, ok = s.vec8(); !ok || len(compression) == 0 {
		return nil, errShort("compression methods")
	}
	h := &Hello{}
	if len(s) == 0 {
		return h, nil // no extensions at all (ancient client)
	}
	exts, ok := s.vec16()
	if !ok || len(s) != 0 {
		return nil, errShort("extensions")
	}
	seen := map[uint16]bool{}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec16()
		if !ok1 || !ok2 {
			return nil, errShort("extension")
		}
		if seen[typ] {
			return nil, fmt.Errorf("malformed ClientHello: extension %d appears twice", typ)
		}
		seen[typ] = true
		var err error
		switch typ {
		case extServerName:
			h.ServerName, err = parseSNI(data)
		case extALPN:
			h.ALPN, err = parseALPN(data)
		case extSupportedVers:
			h.TLS13, err = offersTLS13(data)
		case extEarlyData:
			// Its presence is the offer (empty in a ClientHello); the
			// content is not checked, so no ClientHello accepted before
			// this field existed is refused now.
			h.EarlyData = true
		}
		if err != nil {
			return nil, err
		}
	}
	return h, nil
}

func parseSNI(data cursor) (string, error) {
	list, ok := data.vec16()
	if !ok || len(data) != 0 || len(list) == 0 {
		return "", errShort("server_name")
	}
	name := ""
	for len(list) > 0 {
		typ, ok1 := list.u8()
		v, ok2 := list.vec16()
		if !ok1 || !ok2 {
			return "", errShort("server_name entry")
		}
		if typ != sniTypeHostName {
			continue
		}
		if name != "" {
			return "", errors.New("malformed ClientHello: two host names in server_name")
		}
		if len(v) == 0 || len(v) > 253+1 {
			return "", errors.New("malformed ClientHello: bad host name length")
		}
		for _, c := range v {
			if c <= ' ' || c >= 0x7f {
				return "", errors.New("malformed ClientHello: host name has a control, space or non-ASCII byte")
			}
		}
		name = strings.ToLower(strings.TrimSuffix(string(v), "."))
		if name == "" {
			return "", errors.New("malformed ClientHello: empty host name")
		}
	}
	return name, nil
}

func parseALPN(data cursor) ([]string, error) {
	list, ok := data.vec16()
	if !ok || len(data) != 0 || len(list) == 0 {
		return nil, errShort("alpn")
	}
	var protos []string
	for len(list) > 0 {
		p, ok := list.vec8()
		if !ok || len(p) == 0 {
			return nil, errShort("alpn protocol")
		}
		protos = append(protos, string(p))
	}
	return protos, nil
}

func offersTLS13(data cursor) (bool, error) {
	list, ok := data.vec8()
	if !ok || len(data) != 0 || len(list)%2 != 0 {
		return false, errShort("supported_versions")
	}
	for len(list) > 0 {
		v, _ := list.u16()
		if v == 0x0304 {
			return true, nil
		}
	}
	return false, nil
}

func errShort(what string) error {
	return fmt.Errorf("malformed ClientHello: bad %s", what)
}

// cursor is a read position in a byte string.
type cursor []byte

func (c *cursor) skip(n int) bool {
	if len(*c) < n {
		return false
	}
	*c = (*c)[n:]
	return true
}

func (c *cursor) u8() (byte, bool) {
	if len(*c) < 1 {
		return 0, false
	}
	v := (*c)[0]
	*c = (*c)[1:]
	return v, true
}

func (c *cursor) u16() (uint16, bool) {
	if len(*c) < 2 {
		return 0, false
	}
	v := uint16((*c)[0])<<8 | uint16((*c)[1])
	*c = (*c)[2:]
	return v, true
}

func (c *cursor) vec8() (cursor, bool) {
	n, ok := c.u8()
	if !ok || len(*c) < int(n) {
		return nil, false
	}
	v := (*c)[:n]
	*c = (*c)[n:]
	return v, true
}

func (c *cursor) vec16() (cursor, bool) {
	n, ok := c.u16()
	if !ok || len(*c) < int(n) {
		return nil, false
	}
	v := (*c)[:n]
	*c = (*c)[n:]
	return v, true
}
