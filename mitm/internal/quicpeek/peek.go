package quicpeek

import (
	"bytes"
	"slices"

	"github.com/capsem/capsem/mitm/internal/tlshello"
)

// MaxDatagrams bounds how many datagrams a peek reads before the
// ClientHello must be complete. Real clients need one to three: quic-go's
// and chromium's ClientHello with a post-quantum key share fills two
// Initials, and chromium's repeated CRYPTO frames can push it to three.
// The caller holds these datagrams to replay them to the QUIC server, so
// the bound is also on its memory: 8 × ~1.5 KB per flow in handshake.
const MaxDatagrams = 8

// Hello is what the MITM needs from a QUIC client's first flight.
type Hello struct {
	ServerName string   // SNI host_name, lowered; empty when absent
	ALPN       []string // offered application protocols, in order
	Version    uint32   // QUIC version of the Initials: Version1 or Version2
	DCID       []byte   // Destination Connection ID of the first Initial, which keyed it
	EarlyData  bool     // the ClientHello offers 0-RTT data (early_data)
}

// Peek reads a client's first QUIC datagrams until it holds the whole
// ClientHello. The zero value is not ready; use New.
type Peek struct {
	keys      *initialKeys // from the first Initial's DCID
	version   uint32
	dcid      []byte
	largestPN int64 // largest packet number opened, -1 before the first
	datagrams int
	stream    cryptoStream
	scratch   []byte // decryption buffer, reused across packets
	hello     *Hello
	err       error // the first error, returned by every later Add
}

// New returns a Peek waiting for the client's first datagram.
func New() *Peek {
	return &Peek{largestPN: -1}
}

// Add reads one datagram the client sent, in the order it sent them. It
// returns done once the ClientHello is complete (Hello then returns it);
// Add after that ignores its datagram and returns done again. An error
// means the datagrams are not a QUIC v1/v2 client's first flight capsem
// can read; it is returned again by every later Add. Add keeps no
// reference to datagram.
func (p *Peek) Add(datagram []byte) (done bool, err error) {
	if p.hello != nil {
		return true, nil
	}
	if p.err != nil {
		return false, p.err
	}
	if p.datagrams == MaxDatagrams {
		p.err = errorf("no complete ClientHello in the client's first %d datagrams; real clients send it in 1 to 3", MaxDatagrams)
		return false, p.err
	}
	p.datagrams++
	if err := p.add(datagram); err != nil {
		p.err = err
		return false, err
	}
	return p.hello != nil, nil
}

// Hello returns the ClientHello once Add has reported done, and nil before.
func (p *Peek) Hello() *Hello {
	return p.hello
}

func (p *Peek) add(d []byte) error {
	h, err := parseLongHeader(d)
	if err != nil {
		return err
	}
	if h.typ != h.params.initialType {
		return errorf("datagram %d starts with a %s packet, not an Initial; a client's first flight is Initials until its ClientHello is complete", p.datagrams, typeName(h))
	}
	if len(d) < minInitialDatagram {
		return errorf("a datagram carrying an Initial is %d bytes; QUIC clients pad them to at least %d (RFC 9000 §14.1)", len(d), minInitialDatagram)
	}
	if p.keys == nil {
		if len(h.dcid) < minInitialDCID {
			return errorf("the first Initial's Destination Connection ID is %d bytes; a client's is at least %d (RFC 9000 §7.2)", len(h.dcid), minInitialDCID)
		}
		if p.keys, err = newInitialKeys(h.dcid, h.params); err != nil {
			return err
		}
		p.version, p.dcid = h.version, slices.Clone(h.dcid)
	} else if h.version != p.version || !bytes.Equal(h.dcid, p.dcid) {
		return errorf("datagram %d is QUIC version %#08x to connection ID %x, the first was %#08x to %x; a client keeps both until the server answers", p.datagrams, h.version, h.dcid, p.version, p.dcid)
	}
	for rest := d; ; {
		if h.typ == h.params.initialType {
			frames, pn, err := p.keys.open(rest, h, p.largestPN, &p.scratch)
			if err != nil {
				return err
			}
			p.largestPN = max(p.largestPN, int64(pn))
			if err := readFrames(frames, &p.stream); err != nil {
				return err
			}
		}
		// 0-RTT and Handshake packets coalesced after the Initials are
		// skipped: Initial keys cannot open them.
		if rest = rest[h.end:]; len(rest) == 0 {
			break
		}
		// What follows the first packet is read only while it is a long
		// header packet of the same connection; anything else is ignored,
		// as a QUIC server ignores it (RFC 9000 §12.2) — zero padding after
		// the last packet, for one.
		if h, err = parseLongHeader(rest); err != nil || h.version != p.version || !bytes.Equal(h.dcid, p.dcid) {
			break
		}
	}
	body, err := p.stream.clientHello()
	if body == nil || err != nil {
		return err
	}
	th, err := tlshello.Parse(body)
	if err != nil {
		return errorf("the ClientHello in the Initials is malformed: %v", err)
	}
	if !th.TLS13 {
		return errorf("the ClientHello does not offer TLS 1.3, which QUIC requires (RFC 9001 §4.2)")
	}
	p.hello = &Hello{
		ServerName: th.ServerName,
		ALPN:       th.ALPN,
		Version:    p.version,
		DCID:       p.dcid,
		EarlyData:  th.EarlyData,
	}
	// What was kept to reassemble is not needed any more.
	p.stream, p.scratch, p.keys = cryptoStream{}, nil, nil
	return nil
}

func typeName(h longHeader) string {
	switch h.typ {
	case h.params.zeroRTTType:
		return "0-RTT"
	case h.params.handshakeType:
		return "Handshake"
	}
	return "Retry"
}
