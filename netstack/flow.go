package netstack

import (
	"context"
	"net"
	"net/netip"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// Flow is an allowed TCP connection, handed to a FlowHandler once both ends
// are connected, or an allowed QUIC flow, handed to a DatagramFlowHandler
// with its first Initial (quic.go).
type Flow struct {
	Name  string         // the allowed name the guest resolved
	Port  uint16         // the port the guest dialled (443 for QUIC)
	Guest netip.AddrPort // the guest's end
	Dst   netip.AddrPort // the synthetic address the guest dialled
	// Transport is store.TransportTCP for a TCP flow, store.TransportUDP
	// for a QUIC flow.
	Transport store.Transport

	// Current returns the policy in force now (it changes on reload), for
	// handlers that decide again on every request of a long connection.
	// There is no snapshot of the policy that allowed the flow beside it:
	// a handler that kept one would ignore a reload. A handler takes
	// Current() once per decision it makes as a whole (one HTTP exchange,
	// say), so that one decision never mixes two policies.
	Current func() *policy.Policy
	// Redial opens another upstream connection for this flow's name and
	// port under pol — the policy that decided what the connection is for,
	// so that a connection and the requests it carries answer to one
	// policy — with the same rebinding checks and [upstream] resolve rules
	// as the first one. It is always TCP: for a QUIC flow it is the
	// connection to name:443 the MITM falls back to when the upstream does
	// not answer QUIC.
	Redial func(ctx context.Context, pol *policy.Policy) (net.Conn, error)
	// Upstream returns the addresses Redial would dial under pol, decided
	// again and checked the same way ([upstream] resolve, no private
	// answers unless allow_private), for a handler that reaches the
	// upstream otherwise than over TCP: the MITM tries HTTP/3 over UDP to
	// them.
	Upstream func(ctx context.Context, pol *policy.Policy) ([]netip.AddrPort, error)
	// Dialed is the policy the upstream connection handed to the handler
	// was dialled under (the one in force at the guest's SYN), nil when
	// none was (Local, Pooled). A reload may have replaced it by the time
	// the handler decides anything: Current() is not that policy.
	Dialed *policy.Policy
	// Local is true for a flow to a name capsem serves itself (the MCP
	// gateway, policy.MCPGatewayHost): nothing was dialled, the upstream
	// the handler gets is nil and Redial refuses. A handler that cannot
	// serve it must refuse the flow.
	Local bool
	// Pooled is true when nothing was dialled because Config.Pooled said
	// the handler holds a connection to the upstream already: the
	// upstream the handler gets is nil, and Redial dials when needed.
	Pooled bool
	// MaxDatagram, for a QUIC flow, is the largest UDP payload the guest's
	// link carries (its MTU less the IPv4 and UDP headers): a QUIC server
	// on the flow's PacketConn cannot discover it, having no socket to set
	// Don't Fragment on. Zero for a TCP flow.
	MaxDatagram int

	// established, for a QUIC flow, gives back its handshake slot.
	established func()
}

// Established tells the stack that a QUIC flow's handshake is done, so it
// no longer counts against MaxQUICHandshakes (quic.go); a flow that never
// says so stops counting after quicHandshakeWindow. Calling it again, or
// on a TCP flow, does nothing.
func (f *Flow) Established() {
	if f.established != nil {
		f.established()
	}
}

// FlowResult is what a FlowHandler reports when the flow ends.
type FlowResult struct {
	BytesSent     int64          // guest to upstream
	BytesReceived int64          // upstream to guest
	ConnType      store.ConnType // tcp for a plain splice; handlers may say tls, https, …
	// Refused, when set, is the reason the handler refused the flow after
	// looking into it (a TLS server name that is not the name the guest
	// resolved, say): the flow is then recorded as denied.
	Refused string
	Err     error
}

// FlowHandler carries one allowed flow until it ends. netstack never
// imports mitm: the MITM is a FlowHandler. A handler must return when ctx
// is done. It owns upstream and must close it (it may hand it on, to a
// connection pool say, and close it later); the caller closes guest.
type FlowHandler func(ctx context.Context, guest, upstream net.Conn, f *Flow) FlowResult
