package netstack

import (
	"net/netip"
	"strconv"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/capsem/capsem/store"
)

const (
	udpPortDNS        = 53
	udpPortDHCPServer = 67
	udpPortDHCPClient = 68
	portDoT           = 853
)

var (
	gatewayAddr = tcpip.AddrFrom4(GatewayIP.As4())
	guestAddr   = tcpip.AddrFrom4(GuestIP.As4())
)

// inbound is the guard every guest frame passes before gVisor sees it.
// Anything not explicitly expected is dropped and recorded: the guest is
// assumed hostile. Only TCP, ARP for the gateway and ICMP echo to the
// gateway reach gVisor; DHCP and UDP DNS are answered here directly, and
// UDP to port 443 goes to QUIC flows (quic.go).
//
// more says whether further frames are already waiting to be read, so that
// TCP segments may be coalesced (gro.go).
func (s *Stack) inbound(frame []byte, more bool) {
	if !isIPv4TCP(frame) {
		s.groFlush()
	}
	if len(frame) < header.EthernetMinimumSize {
		s.drops.record(ReasonRuntFrame, store.TransportOther, netip.Addr{}, 0, "")
		return
	}
	if len(frame) > int(s.link.MTU())+header.EthernetMinimumSize {
		s.drops.record(ReasonOversizeFrame, store.TransportOther, netip.Addr{}, 0, "")
		return
	}
	// MACs are compared as bytes: converting them to tcpip.LinkAddress
	// strings would allocate on every frame.
	eth := header.Ethernet(frame)
	src := frame[6:12]
	if src[0]&1 != 0 || string(src) == "\x00\x00\x00\x00\x00\x00" {
		s.drops.recordDetail(ReasonBadSourceMAC, store.TransportOther, netip.Addr{}, 0, macString(src))
		return
	}
	if !s.checkGuestMAC(src) {
		s.drops.recordDetail(ReasonSpoofedMAC, store.TransportOther, netip.Addr{}, 0, macString(src))
		return
	}
	dst := frame[0:6]
	if string(dst) != string(s.link.mac) && string(dst) != string(header.EthernetBroadcastAddress) {
		if eth.Type() == header.IPv6ProtocolNumber {
			s.dropIPv6(frame)
			return
		}
		s.drops.recordDetail(ReasonNotForGateway, store.TransportOther, netip.Addr{}, 0, macString(dst))
		return
	}
	switch eth.Type() {
	case header.ARPProtocolNumber:
		s.guardARP(frame, src)
	case header.IPv4ProtocolNumber:
		s.guardIPv4(frame, more)
	case header.IPv6ProtocolNumber:
		s.dropIPv6(frame)
	default:
		typ := eth.Type()
		s.drops.recordDetail(ReasonEtherType, store.TransportOther, netip.Addr{}, 0, func() string { return "ethertype 0x" + strconv.FormatUint(uint64(typ), 16) })
	}
}

// dropIPv6 drops and counts an IPv6 frame: capsem's guest link is IPv4 only.
func (s *Stack) dropIPv6(frame []byte) {
	s.stats.IPv6Dropped.Add(1)
	ip := header.IPv6(frame[header.EthernetMinimumSize:])
	if len(ip) < header.IPv6MinimumSize {
		s.drops.record(ReasonIPv6, store.TransportIPv6, netip.Addr{}, 0, "")
		return
	}
	next := ip.NextHeader()
	s.drops.recordDetail(ReasonIPv6, store.TransportIPv6, netip.AddrFrom16(ip.DestinationAddress().As16()), 0,
		func() string { return "next header " + strconv.Itoa(int(next)) })
}

func (s *Stack) guardARP(frame []byte, src []byte) {
	a := header.ARP(frame[header.EthernetMinimumSize:])
	if !a.IsValid() {
		s.drops.record(ReasonMalformedARP, store.TransportARP, netip.Addr{}, 0, "")
		return
	}
	if string(a.HardwareAddressSender()) != string(src) {
		s.drops.record(ReasonSpoofedMAC, store.TransportARP, netip.Addr{}, 0, "arp sender differs from frame source")
		return
	}
	sender := tcpip.AddrFromSlice(a.ProtocolAddressSender())
	// 0.0.0.0 is an address probe (RFC 5227) from a guest still configuring.
	if sender != guestAddr && sender != tcpip.AddrFrom4([4]byte{}) {
		s.drops.record(ReasonSpoofedIP, store.TransportARP, addrOf(sender), 0, "")
		return
	}
	target := tcpip.AddrFromSlice(a.ProtocolAddressTarget())
	if target != gatewayAddr {
		s.drops.record(ReasonARPNotGateway, store.TransportARP, addrOf(target), 0, "")
		return
	}
	s.link.deliver(frame)
}

func (s *Stack) guardIPv4(frame []byte, more bool) {
	pkt := frame[header.EthernetMinimumSize:]
	ip := header.IPv4(pkt)
	if !ip.IsValid(len(pkt)) || !ip.IsChecksumValid() {
		s.drops.record(ReasonMalformedIPv4, store.TransportOther, netip.Addr{}, 0, "")
		return
	}
	src, dst := ip.SourceAddress(), ip.DestinationAddress()
	proto := ip.TransportProtocol()
	fragmented := ip.More() || ip.FragmentOffset() != 0
	dstIP := addrOf(dst)

	if proto == header.UDPProtocolNumber && !fragmented {
		udp := header.UDP(ip.Payload())
		if len(udp) < header.UDPMinimumSize || int(udp.Length()) > len(udp) || udp.Length() < header.UDPMinimumSize {
			s.drops.record(ReasonMalformedUDP, store.TransportUDP, dstIP, 0, "")
			return
		}
		payload := udp[header.UDPMinimumSize:udp.Length()]
		if udp.DestinationPort() == udpPortDHCPServer && udp.SourcePort() == udpPortDHCPClient &&
			(src == guestAddr || src == tcpip.AddrFrom4([4]byte{})) {
			s.serveDHCP(frame, payload)
			return
		}
		if src != guestAddr {
			s.drops.record(ReasonSpoofedIP, store.TransportUDP, addrOf(src), udp.DestinationPort(), "")
			return
		}
		switch udp.DestinationPort() {
		case udpPortDNS:
			s.serveUDPDNS(dst, udp.SourcePort(), payload)
		case portDoT:
			s.drops.record(ReasonDoT, store.TransportUDP, dstIP, portDoT, "")
		case portHTTPS:
			s.serveQUIC(ip, udp.SourcePort(), payload)
		default:
			if isQUICInitial(payload) {
				// Decided as the same SYN: a port the policy does
				// not allow is port-not-allowed, not UDP's refusal.
				s.startQUIC(ip, quicKey{sport: udp.SourcePort(), dst: dstIP}, udp.DestinationPort(), payload)
				return
			}
			s.drops.record(ReasonUDPNotAllowed, store.TransportUDP, dstIP, udp.DestinationPort(), "")
		}
		return
	}
	if src != guestAddr {
		s.drops.record(ReasonSpoofedIP, transportName(proto), addrOf(src), 0, "")
		return
	}
	switch proto {
	case header.TCPProtocolNumber:
		// gVisor reassembles fragments; the flow decision is made on the
		// SYN in handleTCP, before the handshake completes.
		if fragmented {
			s.groFlush()
		} else {
			s.reopenTimeWait(ip, src, dst)
			if s.groAdd(frame, more) {
				return
			}
		}
		s.link.deliver(frame)
	case header.ICMPv4ProtocolNumber:
		if fragmented {
			s.drops.record(ReasonFragment, store.TransportICMP, dstIP, 0, "")
			return
		}
		if dst != gatewayAddr {
			s.drops.record(ReasonICMPOutside, store.TransportICMP, dstIP, 0, "")
			return
		}
		icmp := header.ICMPv4(ip.Payload())
		if len(icmp) < header.ICMPv4MinimumSize || icmp.Type() != header.ICMPv4Echo {
			s.drops.record(ReasonICMPType, store.TransportICMP, dstIP, 0, "")
			return
		}
		s.drops.allowed(ReasonICMPEchoGateway, store.TransportICMP, dstIP)
		s.link.deliver(frame)
	case header.UDPProtocolNumber:
		s.drops.record(ReasonFragment, store.TransportUDP, dstIP, 0, "")
	default:
		s.drops.recordDetail(ReasonIPProtocol, store.TransportOther, dstIP, 0, func() string { return "ip protocol " + strconv.Itoa(int(proto)) })
	}
}

// reopenTimeWait lets a guest SYN reopen a 4-tuple whose previous
// connection gVisor still holds in TIME-WAIT. RFC 1122 allows it, and
// gVisor only does it for listening sockets, not for the forwarder: without
// this, a guest that reuses a source port quickly (Linux does, after a
// passive close) has its SYN silently dropped and its connect times out.
func (s *Stack) reopenTimeWait(ip header.IPv4, src, dst tcpip.Address) {
	t := header.TCP(ip.Payload())
	if len(t) < header.TCPMinimumSize {
		return
	}
	if f := t.Flags(); !f.Contains(header.TCPFlagSyn) || f.Contains(header.TCPFlagAck) {
		return
	}
	id := stack.TransportEndpointID{LocalPort: t.DestinationPort(), LocalAddress: dst, RemotePort: t.SourcePort(), RemoteAddress: src}
	ep := s.gs.FindTransportEndpoint(header.IPv4ProtocolNumber, header.TCPProtocolNumber, id, nicID)
	if tep, ok := ep.(*tcp.Endpoint); ok && tcp.EndpointState(tep.State()) == tcp.StateTimeWait {
		tep.Abort()
	}
}

// macString formats a MAC for an event detail, when it is recorded.
func macString(mac []byte) func() string {
	return func() string { return tcpip.LinkAddress(mac).String() }
}

// isIPv4TCP is a cheap look at the headers: is this an IPv4 TCP frame?
func isIPv4TCP(frame []byte) bool {
	return len(frame) >= header.EthernetMinimumSize+header.IPv4MinimumSize &&
		header.Ethernet(frame).Type() == header.IPv4ProtocolNumber &&
		header.IPv4(frame[header.EthernetMinimumSize:]).Protocol() == uint8(header.TCPProtocolNumber)
}

func transportName(p tcpip.TransportProtocolNumber) store.Transport {
	switch p {
	case header.TCPProtocolNumber:
		return store.TransportTCP
	case header.UDPProtocolNumber:
		return store.TransportUDP
	case header.ICMPv4ProtocolNumber:
		return store.TransportICMP
	}
	return store.TransportOther
}

func addrOf(a tcpip.Address) netip.Addr {
	if a.Len() == 4 {
		return netip.AddrFrom4(a.As4())
	}
	return netip.Addr{}
}
