package netstack

import (
	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/policy"
)

// The reasons netstack records in events (store.Net.Reason, store.DNS.Reason).
//
// Stability: these strings are the vocabulary users query (the SQLite
// export's reason column, `capsem inspect`), and tests outside this
// repository match on them. A value never changes; a new one is added here,
// to Reasons, and to the README's table of event reasons (mitm's
// reasons_test.go checks that the three agree).
const (
	// Frames: the guard (guard.go) drops anything it does not expect.

	ReasonRuntFrame     = "runt-frame"              // a frame shorter than an Ethernet header
	ReasonOversizeFrame = "oversize-frame"          // a frame longer than the MTU plus the Ethernet header
	ReasonBadSourceMAC  = "bad-source-mac"          // a source MAC that is multicast, broadcast or all zeros
	ReasonSpoofedMAC    = "spoofed-source-mac"      // a source MAC (or ARP sender, DHCP chaddr) other than the guest's
	ReasonNotForGateway = "frame-not-for-gateway"   // a destination MAC neither the gateway's nor broadcast
	ReasonIPv6          = "ipv6"                    // any IPv6 packet: the guest link is IPv4 only
	ReasonEtherType     = "ethertype-not-allowed"   // an EtherType other than ARP, IPv4 and IPv6
	ReasonMalformedARP  = "malformed-arp"           // an ARP packet that does not parse
	ReasonARPNotGateway = "arp-not-for-gateway"     // an ARP request for an address other than the gateway's
	ReasonMalformedIPv4 = "malformed-ipv4"          // an IPv4 header that does not parse or whose checksum is wrong
	ReasonSpoofedIP     = "spoofed-source-ip"       // a source IP other than the guest's (0.0.0.0 only for DHCP and ARP probes)
	ReasonFragment      = "ip-fragment"             // a fragment of a UDP or ICMP packet (only TCP is reassembled)
	ReasonIPProtocol    = "ip-protocol-not-allowed" // an IP protocol other than TCP, UDP and ICMP

	// UDP and ICMP: only DNS and DHCP are answered, and echo to the gateway.

	ReasonMalformedUDP    = "malformed-udp"         // a UDP header whose length does not fit the packet
	ReasonUDPNotAllowed   = "udp-not-allowed"       // UDP to a port other than 53 (DNS) and 67 (DHCP) that is neither a QUIC flow's nor a QUIC Initial
	ReasonDoT             = "dns-over-tls"          // TCP or UDP to port 853: capsem answers DNS itself
	ReasonICMPOutside     = "icmp-outside"          // ICMP to an address other than the gateway
	ReasonICMPType        = "icmp-type-not-allowed" // ICMP to the gateway that is not an echo request
	ReasonICMPEchoGateway = "icmp-echo-gateway"     // allowed: an echo request to the gateway, answered
	ReasonMalformedDHCP   = "malformed-dhcp"        // a DHCP message that does not parse, or of an unknown type
	ReasonDHCPOffer       = "dhcp-offer"            // allowed: a DISCOVER answered with an OFFER
	ReasonDHCPAck         = "dhcp-ack"              // allowed: a REQUEST for the guest's address (or an INFORM) acknowledged
	ReasonDHCPNak         = "dhcp-nak"              // denied: a REQUEST for another address, answered NAK

	// QUIC (quic.go): UDP that starts with a QUIC Initial, to any port, is
	// decided like a SYN to that port (direct-ip, port-not-allowed, … with
	// transport udp), refusals answered with ICMP port unreachable.

	ReasonQUICBlocked  = "quic-blocked"       // a QUIC Initial to an allowed name under [quic] mode = "block": ICMP port unreachable
	ReasonQUICUnserved = "quic-unserved"      // a QUIC Initial to an allowed name while no QUIC handler runs (Config.QUICFlows nil), or on an allowed port other than 443: ICMP port unreachable
	ReasonQUICFlood    = "quic-initial-flood" // a QUIC Initial dropped: MaxQUICHandshakes flows in their handshake

	// DNS (dns.go): every query gets an answer, and an event.

	ReasonDNSAllowedName  = "allowed-name"               // allowed: an A query for an allowed name, answered with a 198.19.x.y address
	ReasonDNSEmptyAnswer  = "allowed-name-no-records"    // allowed: another type (AAAA, …) for an allowed name, answered empty (NOERROR)
	ReasonDNSDeniedName   = "denied-name"                // a name the policy does not allow: NXDOMAIN
	ReasonDNSInvalidName  = policy.ReasonInvalidName     // a name that is no valid host name: NXDOMAIN (stored escaped)
	ReasonDNSSecretInName = policy.ReasonSecretWrongHost // a name holding a secret's placeholder: NXDOMAIN
	ReasonWildcardCap     = "wildcard-name-cap"          // a new name under a "*.x" entry beyond [dns] max_wildcard_names: NXDOMAIN
	ReasonPoolExhausted   = "dns-pool-exhausted"         // no fake-DNS address is free for a new name: SERVFAIL
	ReasonMalformedDNS    = "malformed-dns"              // a query that does not parse or is a response (no answer), or asks not exactly one question (FORMERR)
	ReasonDNSNotSupported = "dns-opcode-not-supported"   // an opcode other than QUERY: NOTIMP
	ReasonDNSClassNotIN   = "dns-class-not-in"           // a class other than IN: REFUSED

	// TCP (syn.go, dial.go, limits.go): decided on the SYN, before the guest's
	// handshake completes.

	ReasonDirectIP             = "direct-ip"                // a SYN to an address capsem's DNS did not hand out: RST
	ReasonGatewayPort          = "gateway-port-closed"      // a SYN to the gateway on a port other than 53: RST
	ReasonSYNCap               = "syn-cap"                  // a SYN dropped: MaxInFlightSYN handshakes pending
	ReasonFlowCap              = "flow-cap"                 // a SYN refused: MaxFlows flows open
	ReasonDNSTCPCap            = "dns-tcp-cap"              // a SYN to port 53 refused: MaxDNSTCPConns open
	ReasonUpstreamPrivate      = "upstream-private-address" // the host resolved the allowed name to a private address (DNS rebinding): RST
	ReasonUpstreamNoAddr       = "upstream-no-address"      // the host could not resolve the allowed name (or its [upstream] resolve target): RST
	ReasonUpstreamFailed       = "upstream-unreachable"     // no address of the allowed name accepted the connection (or the [upstream] proxy did not answer): RST
	ReasonUpstreamProxyRefused = "upstream-proxy-refused"   // the [upstream] proxy answered the CONNECT for the allowed name with other than 2xx (407: credentials): RST
	ReasonHandshakeFailed      = "guest-handshake-failed"   // allowed and dialled, but the guest's side of the handshake failed
	ReasonLocalUnserved        = "local-service-unserved"   // a flow to a name capsem serves itself (the MCP gateway) that its flow handler cannot serve

	// Inbound (inbound.go): a connection to a port published on the host.

	ReasonPublished    = "published"     // allowed: a connection to a published host port, carried into the guest
	ReasonGuestRefused = "guest-refused" // a connection to a published host port that nothing in the guest accepted: the host's client is reset

	// [[forward]] (syn.go): the guest's connection to a host service.

	ReasonForwardFailed = "forward-unreachable" // TCP to a [[forward]] name and port whose host service did not accept the connection: RST

	// The store.

	ReasonStoreDown = "store-unavailable" // refused because its event could not be recorded (fail closed)

	// Asked (ask.go): a DNS query or SYN the policy did not foresee
	// ([network] unknown = "ask"), held while a person was asked;
	// matched_rule says who answered ("asked: NAME (once, by cli)").

	ReasonAskedAllowed = ask.ReasonAllowed    // a person allowed it: once, for the session or always
	ReasonAskedDenied  = ask.ReasonDenied     // a person denied it: NXDOMAIN, RST
	ReasonAskTimeout   = ask.ReasonTimeout    // nobody answered within ask_timeout: NXDOMAIN, RST
	ReasonAskUnheard   = ask.ReasonUnanswered // nobody was listening: refused at once
	ReasonAskCapped    = ask.ReasonCapped     // 64 questions (or 256 held queries and SYNs) were waiting: refused at once
)

// Reasons is every reason netstack records: its own, and the policy's
// decisions it records as they are (a flow refused or allowed by
// [network]). It exists for mitm's reasons_test.go, which checks it against
// the constants above and the README; nothing else reads it.
func Reasons() []string {
	return []string{
		ReasonRuntFrame, ReasonOversizeFrame, ReasonBadSourceMAC, ReasonSpoofedMAC, ReasonNotForGateway,
		ReasonIPv6, ReasonEtherType, ReasonMalformedARP, ReasonARPNotGateway, ReasonMalformedIPv4,
		ReasonSpoofedIP, ReasonFragment, ReasonIPProtocol,

		ReasonMalformedUDP, ReasonUDPNotAllowed, ReasonDoT, ReasonICMPOutside, ReasonICMPType,
		ReasonICMPEchoGateway, ReasonMalformedDHCP, ReasonDHCPOffer, ReasonDHCPAck, ReasonDHCPNak,

		ReasonQUICBlocked, ReasonQUICUnserved, ReasonQUICFlood,

		ReasonDNSAllowedName, ReasonDNSEmptyAnswer, ReasonDNSDeniedName, ReasonDNSInvalidName, ReasonDNSSecretInName,
		ReasonWildcardCap, ReasonPoolExhausted, ReasonMalformedDNS, ReasonDNSNotSupported, ReasonDNSClassNotIN,

		ReasonDirectIP, ReasonGatewayPort, ReasonSYNCap, ReasonFlowCap, ReasonDNSTCPCap,
		ReasonUpstreamPrivate, ReasonUpstreamNoAddr, ReasonUpstreamFailed, ReasonUpstreamProxyRefused, ReasonHandshakeFailed, ReasonLocalUnserved,

		ReasonPublished, ReasonGuestRefused, ReasonForwardFailed,

		ReasonStoreDown,

		ReasonAskedAllowed, ReasonAskedDenied, ReasonAskTimeout, ReasonAskUnheard, ReasonAskCapped,

		// A flow's [network] decision (syn.go), recorded as policy words it.
		policy.ReasonAllowed, policy.ReasonDeniedByRule, policy.ReasonNoMatchingRule, policy.ReasonPortNotAllowed,
		policy.ReasonForwarded,
	}
}
