package netstack

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/capsem/capsem/store"
)

// DHCP is answered in the guard, on raw frames: a client without an address
// is awkward for a socket-based server in gVisor, and the whole protocol the
// guest needs is one lease for one fixed address.

const (
	dhcpMinLen      = 240 // fixed BOOTP header + magic cookie
	dhcpMagic       = 0x63825363
	dhcpLeaseSecond = 86400

	dhcpDiscover = 1
	dhcpOffer    = 2
	dhcpRequest  = 3
	dhcpDecline  = 4
	dhcpAck      = 5
	dhcpNak      = 6
	dhcpRelease  = 7
	dhcpInform   = 8

	optPad        = 0
	optSubnetMask = 1
	optRouter     = 3
	optDNS        = 6
	optMTU        = 26
	optBroadcast  = 28
	optRequested  = 50
	optLease      = 51
	optMsgType    = 53
	optServerID   = 54
	optEnd        = 255
)

var errDHCP = errors.New("malformed DHCP message")

// dhcpRequestMsg is what the server needs from a client message.
type dhcpRequestMsg struct {
	xid       uint32
	flags     uint16
	ciaddr    [4]byte
	chaddr    [6]byte
	msgType   byte
	requested [4]byte
	hasReq    bool
	serverID  [4]byte
	hasServer bool
}

// parseDHCP decodes a client's BOOTREQUEST. It never panics on any input.
func parseDHCP(b []byte) (dhcpRequestMsg, error) {
	var m dhcpRequestMsg
	if len(b) < dhcpMinLen || b[0] != 1 || b[1] != 1 || b[2] != 6 {
		return m, errDHCP
	}
	if binary.BigEndian.Uint32(b[236:240]) != dhcpMagic {
		return m, errDHCP
	}
	m.xid = binary.BigEndian.Uint32(b[4:8])
	m.flags = binary.BigEndian.Uint16(b[10:12])
	copy(m.ciaddr[:], b[12:16])
	copy(m.chaddr[:], b[28:34])
	opts := b[dhcpMinLen:]
	for len(opts) > 0 {
		code := opts[0]
		if code == optEnd {
			break
		}
		if code == optPad {
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || len(opts) < 2+int(opts[1]) {
			return m, errDHCP
		}
		val := opts[2 : 2+int(opts[1])]
		switch code {
		case optMsgType:
			if len(val) == 1 {
				m.msgType = val[0]
			}
		case optRequested:
			if len(val) == 4 {
				copy(m.requested[:], val)
				m.hasReq = true
			}
		case optServerID:
			if len(val) == 4 {
				copy(m.serverID[:], val)
				m.hasServer = true
			}
		}
		opts = opts[2+len(val):]
	}
	if m.msgType == 0 {
		return m, errDHCP
	}
	return m, nil
}

// appendDHCPReply appends the server's BOOTREPLY for m with message type t.
func appendDHCPReply(dst []byte, m dhcpRequestMsg, t byte, mtu uint16) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, dhcpMinLen)...)
	b := dst[start:]
	b[0], b[1], b[2] = 2, 1, 6
	binary.BigEndian.PutUint32(b[4:8], m.xid)
	binary.BigEndian.PutUint16(b[10:12], m.flags)
	gw := GatewayIP.As4()
	if t == dhcpOffer || t == dhcpAck {
		if t == dhcpAck && m.msgType == dhcpInform {
			copy(b[12:16], m.ciaddr[:])
		} else {
			guest := GuestIP.As4()
			copy(b[16:20], guest[:])
		}
		copy(b[20:24], gw[:])
	}
	copy(b[28:34], m.chaddr[:])
	binary.BigEndian.PutUint32(b[236:240], dhcpMagic)

	mask := [4]byte{255, 255, 255, 0}
	bcast := [4]byte{198, 18, 0, 255}
	dst = append(dst, optMsgType, 1, t)
	dst = append(dst, optServerID, 4, gw[0], gw[1], gw[2], gw[3])
	if t != dhcpNak {
		if m.msgType != dhcpInform {
			dst = append(dst, optLease, 4)
			dst = binary.BigEndian.AppendUint32(dst, dhcpLeaseSecond)
		}
		dst = append(dst, optSubnetMask, 4, mask[0], mask[1], mask[2], mask[3])
		dst = append(dst, optRouter, 4, gw[0], gw[1], gw[2], gw[3])
		dst = append(dst, optDNS, 4, gw[0], gw[1], gw[2], gw[3])
		dst = append(dst, optBroadcast, 4, bcast[0], bcast[1], bcast[2], bcast[3])
		dst = append(dst, optMTU, 2, byte(mtu>>8), byte(mtu))
	}
	dst = append(dst, optEnd)
	for len(dst)-start < 300 { // BOOTP minimum message size
		dst = append(dst, optPad)
	}
	return dst
}

// serveDHCP answers one client message that arrived in frame.
func (s *Stack) serveDHCP(frame, payload []byte) {
	m, err := parseDHCP(payload)
	if err != nil {
		s.drops.record(ReasonMalformedDHCP, store.TransportUDP, netip.Addr{}, udpPortDHCPServer, err.Error())
		return
	}
	src := header.Ethernet(frame).SourceAddress()
	if tcpip.LinkAddress(m.chaddr[:]) != src {
		s.drops.record(ReasonSpoofedMAC, store.TransportUDP, netip.Addr{}, udpPortDHCPServer, "DHCP chaddr differs from frame source")
		return
	}
	var reply byte
	switch m.msgType {
	case dhcpDiscover:
		reply = dhcpOffer
	case dhcpRequest:
		want := m.requested
		if !m.hasReq {
			want = m.ciaddr
		}
		switch {
		case m.hasServer && m.serverID != GatewayIP.As4():
			return // the client chose another server: nothing to say
		case want != GuestIP.As4():
			reply = dhcpNak
		default:
			reply = dhcpAck
		}
	case dhcpInform:
		reply = dhcpAck
	case dhcpRelease, dhcpDecline:
		return
	default:
		s.drops.record(ReasonMalformedDHCP, store.TransportUDP, netip.Addr{}, udpPortDHCPServer, "unknown DHCP message type")
		return
	}
	var buf [600]byte
	body := appendDHCPReply(buf[:0], m, reply, uint16(s.link.MTU()))
	out := appendUDPFrame(make([]byte, 0, 700), src, s.link.mac,
		gatewayAddr, tcpip.AddrFrom4([4]byte{255, 255, 255, 255}), udpPortDHCPServer, udpPortDHCPClient, body)
	if err := s.link.writeFrame(out); err != nil {
		s.log.Warn("dhcp reply not sent", "err", err)
		return
	}
	reason := dhcpReplyReason(reply)
	decision := store.Allowed
	if reply == dhcpNak {
		decision = store.Denied
	} else if reply == dhcpAck {
		s.stats.DHCPAcks.Add(1)
	}
	// Rate-limited like drops: a guest can send DHCP messages without end.
	s.drops.event("dhcp", &store.Net{
		Transport: store.TransportUDP,
		Decision:  decision,
		Reason:    reason,
		IP:        GuestIP,
		Port:      udpPortDHCPServer,
		Detail:    "dhcp for mac " + src.String(),
	})
}

func dhcpReplyReason(t byte) string {
	switch t {
	case dhcpOffer:
		return ReasonDHCPOffer
	case dhcpAck:
		return ReasonDHCPAck
	}
	return ReasonDHCPNak
}
