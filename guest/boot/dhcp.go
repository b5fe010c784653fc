package boot

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"time"
)

// DHCP message types and options used by the client.
const (
	dhcpDiscover = 1
	dhcpOffer    = 2
	dhcpRequest  = 3
	dhcpAck      = 5
	dhcpNak      = 6

	dhcpMagic = 0x63825363
)

// Lease is what a DHCP server assigned.
type Lease struct {
	Addr    netip.Prefix
	Gateway netip.Addr
	DNS     []netip.Addr
	MTU     int
	Server  netip.Addr
	Time    time.Duration
}

var errNotForUs = errors.New("dhcp: not a reply to this client")

// dhcpMessage builds a client BOOTREQUEST. It asks for a broadcast reply
// (the client has no address yet to receive a unicast one).
func dhcpMessage(typ byte, xid uint32, mac net.HardwareAddr, requested, server netip.Addr) []byte {
	b := make([]byte, 240, 300)
	b[0], b[1], b[2] = 1, 1, 6 // BOOTREQUEST, Ethernet, 6-byte MAC
	binary.BigEndian.PutUint32(b[4:], xid)
	binary.BigEndian.PutUint16(b[10:], 0x8000) // broadcast flag
	copy(b[28:], mac)
	binary.BigEndian.PutUint32(b[236:], dhcpMagic)
	b = append(b, 53, 1, typ)
	if requested.IsValid() {
		a := requested.As4()
		b = append(b, 50, 4, a[0], a[1], a[2], a[3])
	}
	if server.IsValid() {
		a := server.As4()
		b = append(b, 54, 4, a[0], a[1], a[2], a[3])
	}
	b = append(b, 55, 5, 1, 3, 6, 26, 51) // mask, router, DNS, MTU, lease time
	b = append(b, 255)
	for len(b) < 300 {
		b = append(b, 0)
	}
	return b
}

// parseDHCPReply decodes a server's BOOTREPLY for transaction xid and
// client mac. It never panics on any input.
func parseDHCPReply(b []byte, xid uint32, mac net.HardwareAddr) (byte, Lease, error) {
	var l Lease
	if len(b) < 240 || b[0] != 2 || binary.BigEndian.Uint32(b[236:]) != dhcpMagic {
		return 0, l, errors.New("dhcp: malformed reply")
	}
	if binary.BigEndian.Uint32(b[4:]) != xid || len(mac) != 6 || string(b[28:34]) != string(mac) {
		return 0, l, errNotForUs
	}
	yi := netip.AddrFrom4([4]byte(b[16:20]))
	var typ byte
	bits := -1
	for o := b[240:]; len(o) > 0; {
		code := o[0]
		if code == 255 {
			break
		}
		if code == 0 {
			o = o[1:]
			continue
		}
		if len(o) < 2 || len(o) < 2+int(o[1]) {
			return 0, l, errors.New("dhcp: truncated option")
		}
		v := o[2 : 2+int(o[1])]
		switch code {
		case 53:
			if len(v) == 1 {
				typ = v[0]
			}
		case 1:
			if len(v) == 4 {
				ones, sz := net.IPMask(v).Size()
				if sz == 32 {
					bits = ones
				}
			}
		case 3:
			if len(v) >= 4 {
				l.Gateway = netip.AddrFrom4([4]byte(v[:4]))
			}
		case 6:
			for i := 0; i+4 <= len(v); i += 4 {
				l.DNS = append(l.DNS, netip.AddrFrom4([4]byte(v[i:i+4])))
			}
		case 26:
			if len(v) == 2 {
				l.MTU = int(binary.BigEndian.Uint16(v))
			}
		case 51:
			if len(v) == 4 {
				l.Time = time.Duration(binary.BigEndian.Uint32(v)) * time.Second
			}
		case 54:
			if len(v) == 4 {
				l.Server = netip.AddrFrom4([4]byte(v))
			}
		}
		o = o[2+len(v):]
	}
	if typ == 0 {
		return 0, l, errors.New("dhcp: reply without a message type")
	}
	if typ == dhcpOffer || typ == dhcpAck {
		if bits <= 0 {
			bits = 24
		}
		if !yi.IsValid() || yi.IsUnspecified() {
			return 0, l, errors.New("dhcp: reply without an address")
		}
		l.Addr = netip.PrefixFrom(yi, bits)
	}
	return typ, l, nil
}
