package netstack

import (
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/capsem/capsem/store"
)

// DefaultMaxFlows caps the guest's open TCP connections (allowed flows
// being dialled or carried, and TCP/53 connections). Each holds a host
// socket, two or three goroutines and gVisor buffers that grow with
// traffic. Measured in the namespace harness: 1,000 idle flows to a local
// upstream took capsem-net from 41 to 83 MiB (43 KiB a flow), 3,000 more
// another 94 MiB (32 KiB each); so the cap bounds idle flows to ~170 MiB
// and host descriptors to 4,096, while a busy agent (parallel npm or pip
// downloads) holds tens to a few hundred.
const DefaultMaxFlows = 4096

// DefaultMaxQUICHandshakes caps the QUIC flows the guest starts within
// quicHandshakeWindow that have not finished their handshake (256): a flow gives its slot back when its handler says the handshake is
// done, or after the window. It is a cap on the rate of new flows more
// than on how many run at once — a handler must bound its own wait (the
// MITM gives the ClientHello the same 3 s, then the rest of the handshake
// up to its HelloTimeout, 15 s: at most about five windows' worth, ~1,300
// flows, are in their handshake at once). Each flow holds a handler
// goroutine with the QUIC server's handshake state, and up to
// maxQueuedDatagramBytes of queued datagrams; a browser opens a handful
// at once, while a flood of Initials — each costing the guest only a
// 1,200-byte datagram — would otherwise have the host start handshakes
// until MaxFlows.
const DefaultMaxQUICHandshakes = 256

// slots counts what a cap limits.
type slots struct {
	n   atomic.Int64
	max int64
}

// take claims one slot, or reports that all are taken.
func (s *slots) take() bool {
	if s.n.Add(1) > s.max {
		s.n.Add(-1)
		return false
	}
	return true
}

func (s *slots) give() { s.n.Add(-1) }

// admit is asked before the stack lets something happen that must be
// recorded (a flow dialled upstream, an allowed DNS answer): when the
// recorder cannot record events, it refuses (fail closed). The first
// refusal, and the recovery after it, are logged so the user is told.
func (s *Stack) admit() error {
	err := s.cfg.Recorder.Admit()
	if err != nil {
		if s.storeDown.CompareAndSwap(false, true) {
			s.log.Warn("events cannot be recorded: every new flow and DNS answer is refused until they can", "err", err)
		}
		return err
	}
	if s.storeDown.CompareAndSwap(true, false) {
		s.log.Warn("events are recorded again: new flows and DNS answers are allowed again")
	}
	return nil
}

// synHandler wraps gVisor's TCP forwarder so that the SYNs it ignores at
// the in-flight cap (MaxInFlightSYN handshakes already waiting for a
// decision or a dial) are recorded: gVisor only counts them. The guest's
// TCP retransmits such a SYN, so it is dropped, not refused; the drop log
// records it like any other dropped frame, rate-limited and counted.
func (s *Stack) synHandler(fwd *tcp.Forwarder) func(stack.TransportEndpointID, *stack.PacketBuffer) bool {
	dropped := s.gs.Stats().TCP.ForwardMaxInFlightDrop
	return func(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		handled := fwd.HandlePacket(id, pkt)
		for {
			seen, total := s.synCapSeen.Load(), dropped.Value()
			if total <= seen {
				break
			}
			if s.synCapSeen.CompareAndSwap(seen, total) {
				ip := addrOf(id.LocalAddress)
				for n := total - seen; n > 0; n-- {
					s.drops.record(ReasonSYNCap, store.TransportTCP, ip, id.LocalPort,
						"more SYNs than MaxInFlightSYN were waiting for a decision or an upstream dial; the guest retransmits")
				}
				break
			}
		}
		return handled
	}
}
