package netstack

import (
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// appendUDPFrame appends to dst an Ethernet frame carrying one IPv4 UDP
// datagram, checksums filled in. Used for the answers the guard gives
// itself (DHCP, UDP DNS) without a round trip through gVisor.
func appendUDPFrame(dst []byte, dstMAC, srcMAC tcpip.LinkAddress, srcIP, dstIP tcpip.Address, srcPort, dstPort uint16, payload []byte) []byte {
	const hdrs = header.EthernetMinimumSize + header.IPv4MinimumSize + header.UDPMinimumSize
	start := len(dst)
	dst = append(dst, make([]byte, hdrs)...)
	dst = append(dst, payload...)
	frame := dst[start:]

	header.Ethernet(frame).Encode(&header.EthernetFields{
		SrcAddr: srcMAC,
		DstAddr: dstMAC,
		Type:    header.IPv4ProtocolNumber,
	})
	ipLen := header.IPv4MinimumSize + header.UDPMinimumSize + len(payload)
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(ipLen),
		TTL:         64,
		Protocol:    uint8(header.UDPProtocolNumber),
		SrcAddr:     srcIP,
		DstAddr:     dstIP,
	})
	ip.SetChecksum(^ip.CalculateChecksum())

	udpLen := uint16(header.UDPMinimumSize + len(payload))
	udp := header.UDP(frame[header.EthernetMinimumSize+header.IPv4MinimumSize:])
	udp.Encode(&header.UDPFields{SrcPort: srcPort, DstPort: dstPort, Length: udpLen})
	xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, srcIP, dstIP, udpLen)
	xsum = checksum.Checksum(payload, xsum)
	udp.SetChecksum(^udp.CalculateChecksum(xsum))
	if udp.Checksum() == 0 {
		udp.SetChecksum(0xffff)
	}
	return dst
}

// icmpQuoteBytes is how much of the refused datagram's IP payload an ICMP
// error quotes after its IP header: 64 bits, as RFC 792 asks, enough for
// the UDP ports by which the guest's kernel finds the socket.
const icmpQuoteBytes = 8

// appendICMPPortUnreachable appends to dst an Ethernet frame carrying an
// ICMP destination unreachable, port unreachable (type 3, code 3) about
// the guest's IPv4 packet ip, sent from the address ip was sent to. It
// quotes ip's header and its first 8 bytes of payload (RFC 792).
func appendICMPPortUnreachable(dst []byte, dstMAC, srcMAC tcpip.LinkAddress, ip header.IPv4) []byte {
	quote := ip[:min(len(ip), int(ip.HeaderLength())+icmpQuoteBytes)]
	const hdrs = header.EthernetMinimumSize + header.IPv4MinimumSize + header.ICMPv4MinimumSize
	start := len(dst)
	dst = append(dst, make([]byte, hdrs)...)
	dst = append(dst, quote...)
	frame := dst[start:]

	header.Ethernet(frame).Encode(&header.EthernetFields{
		SrcAddr: srcMAC,
		DstAddr: dstMAC,
		Type:    header.IPv4ProtocolNumber,
	})
	out := header.IPv4(frame[header.EthernetMinimumSize:])
	out.Encode(&header.IPv4Fields{
		TotalLength: uint16(header.IPv4MinimumSize + header.ICMPv4MinimumSize + len(quote)),
		TTL:         64,
		Protocol:    uint8(header.ICMPv4ProtocolNumber),
		SrcAddr:     ip.DestinationAddress(),
		DstAddr:     ip.SourceAddress(),
	})
	out.SetChecksum(^out.CalculateChecksum())

	icmp := header.ICMPv4(frame[header.EthernetMinimumSize+header.IPv4MinimumSize:])
	icmp.SetType(header.ICMPv4DstUnreachable)
	icmp.SetCode(header.ICMPv4PortUnreachable)
	icmp.SetChecksum(0)
	icmp.SetChecksum(^checksum.Checksum(icmp, 0))
	return dst
}
