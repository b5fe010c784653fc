package netstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// The guest link. These ranges (RFC 2544 benchmarking, 198.18.0.0/15) never
// route anywhere real.
var (
	GatewayIP  = netip.MustParseAddr("198.18.0.1")
	GuestIP    = netip.MustParseAddr("198.18.0.2")
	LinkPrefix = netip.MustParsePrefix("198.18.0.0/24")
	PoolPrefix = netip.MustParsePrefix("198.19.0.0/16")
	// GatewayMAC is the stack's own, locally administered, MAC address.
	GatewayMAC = net.HardwareAddr{0x02, 0xca, 0x95, 0x00, 0x00, 0x01}
)

const (
	// DefaultMTU is the guest MTU when none is configured.
	DefaultMTU = 1500
	// DefaultMaxInFlightSYN caps TCP handshakes awaiting a policy decision
	// and an upstream dial. gvproxy's 10 stalls real workloads.
	DefaultMaxInFlightSYN = 1024
	// DefaultDialTimeout bounds the upstream dial made while the guest's SYN
	// waits.
	DefaultDialTimeout = 10 * time.Second
)

// Recorder receives every event the stack produces. store.Writer is one.
type Recorder interface {
	Append(store.Event)
	// Admit reports whether events can be recorded now (nil) or why not.
	// The stack asks before it lets a flow be dialled or a name resolve,
	// and refuses when it cannot record them (fail closed).
	Admit() error
}

// placeholderNoter is a Recorder that keeps the placeholders of the
// session's secrets in its record (store.Writer is one), so that an export
// with --scrub redacts them, fixed ones too. The stack tells it those of
// every policy it is given.
type placeholderNoter interface {
	NotePlaceholders(byName map[string]string)
}

func notePlaceholders(r Recorder, p *policy.Policy) {
	if n, ok := r.(placeholderNoter); ok && len(p.Secrets()) > 0 {
		n.NotePlaceholders(p.Placeholders())
	}
}

// Resolver looks up the real addresses of an allowed name when capsem dials
// it. net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Stack. Policy and Recorder are required.
type Config struct {
	// MTU of the guest link, 576..65520. Zero means 1500.
	MTU uint32
	// Policy is the initial policy; SetPolicy swaps it atomically later.
	Policy *policy.Policy
	// Recorder gets every decision as an event.
	Recorder Recorder
	// Resolver resolves allowed names on dial. Nil means net.DefaultResolver.
	Resolver Resolver
	// Dial opens upstream connections. Nil means a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds an upstream dial. Zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// GuestMAC pins the guest's MAC. Nil means: the first source MAC seen on
	// a connection is the guest's, and any other is a spoof.
	GuestMAC net.HardwareAddr
	// MaxInFlightSYN caps pending TCP handshakes: SYNs waiting for a
	// decision or an upstream dial. Beyond it SYNs are dropped (the guest
	// retransmits) and recorded as syn-cap. Zero means 1024.
	MaxInFlightSYN int
	// MaxFlows caps the guest's open TCP connections, allowed flows and
	// TCP/53 together; beyond it a SYN gets a RST and a flow-cap event.
	// Zero means DefaultMaxFlows (4096).
	MaxFlows int
	// MaxDNSTCPConns caps the guest's open TCP/53 connections; beyond it
	// a SYN to port 53 gets a RST and a dns-tcp-cap event. Zero means
	// DefaultMaxDNSTCPConns (64).
	MaxDNSTCPConns int
	// Tap sees every frame both ways (pcap). Optional.
	Tap FrameTap
	// Flows handles allowed TCP flows. Nil means Splice.
	Flows FlowHandler
	// Pooled, when set, says whether the Flows handler holds an open
	// connection to name:port made under pol (the MITM's pool of
	// kept-alive upstream connections). For such a flow the stack dials
	// nothing before the guest's handshake completes — the guest's
	// connection costs no upstream round trip — and hands it over with a
	// nil upstream and Flow.Pooled set; the handler dials with Redial if
	// it needs to. Nil: every flow's upstream is dialled first.
	Pooled func(pol *policy.Policy, name string, port uint16) bool
	// QUICFlows handles allowed QUIC flows: UDP to port 443 of an allowed
	// name that starts with a QUIC Initial (quic.go). Nil means none is
	// served: such an Initial gets ICMP port unreachable and a
	// quic-unserved event, and the client falls back to TCP.
	QUICFlows DatagramFlowHandler
	// MaxQUICHandshakes caps the QUIC flows in their handshake at once
	// (quic.go); beyond it an Initial is dropped and counted as
	// quic-initial-flood. Zero means DefaultMaxQUICHandshakes (256).
	MaxQUICHandshakes int
	// QUICIdleTimeout ends a QUIC flow after this long without a datagram
	// either way. Zero means DefaultQUICIdleTimeout (30 s).
	QUICIdleTimeout time.Duration
	// Asker is asked about the names and ports no entry names while the
	// policy says [network] unknown = "ask"; the query or SYN waits for
	// the answer (ask.go). Nil: nobody is asked, and such a policy refuses
	// them at once (ask-unanswered).
	Asker Asker
	// Logger for operational messages (not events). Nil means slog.Default().
	Logger *slog.Logger
}

// Stats are the stack's counters. All fields are safe to read concurrently.
type Stats struct {
	FramesIn, FramesOut, WriteErrors   atomic.Uint64
	IPv6Dropped, FramesDropped         atomic.Uint64
	DNSQueries, DNSAllowed, DNSDenied  atomic.Uint64
	FlowsAllowed, FlowsDenied          atomic.Uint64
	FlowsCapped, DNSTCPCapped          atomic.Uint64 // SYNs refused at MaxFlows, MaxDNSTCPConns
	StoreRefusals                      atomic.Uint64 // flows and answers refused: events could not be recorded
	DHCPAcks                           atomic.Uint64
	BytesToUpstream, BytesFromUpstream atomic.Uint64
	// GROSegments were coalesced into GROMerged segments before gVisor.
	GROSegments, GROMerged atomic.Uint64
	// QUICQueueDrops are guest datagrams of a QUIC flow dropped because
	// its handler had not read the ones before; QUICWritesTooBig are
	// datagrams a handler wrote that did not fit the guest's MTU.
	QUICQueueDrops, QUICWritesTooBig atomic.Uint64
}

// Snapshot returns the counters as a map, for logs and tests.
func (s *Stats) Snapshot() map[string]uint64 {
	return map[string]uint64{
		"frames_in":           s.FramesIn.Load(),
		"frames_out":          s.FramesOut.Load(),
		"write_errors":        s.WriteErrors.Load(),
		"ipv6_dropped":        s.IPv6Dropped.Load(),
		"frames_dropped":      s.FramesDropped.Load(),
		"dns_queries":         s.DNSQueries.Load(),
		"dns_allowed":         s.DNSAllowed.Load(),
		"dns_denied":          s.DNSDenied.Load(),
		"flows_allowed":       s.FlowsAllowed.Load(),
		"flows_denied":        s.FlowsDenied.Load(),
		"flows_capped":        s.FlowsCapped.Load(),
		"dns_tcp_capped":      s.DNSTCPCapped.Load(),
		"store_refusals":      s.StoreRefusals.Load(),
		"dhcp_acks":           s.DHCPAcks.Load(),
		"bytes_to_upstream":   s.BytesToUpstream.Load(),
		"bytes_from_upstream": s.BytesFromUpstream.Load(),
		"gro_segments":        s.GROSegments.Load(),
		"gro_merged":          s.GROMerged.Load(),
		"quic_queue_drops":    s.QUICQueueDrops.Load(),
		"quic_writes_too_big": s.QUICWritesTooBig.Load(),
	}
}

const nicID tcpip.NICID = 1

// Stack is one guest's network: a gVisor stack behind the guard, fake DNS,
// DHCP and the TCP flow dispatcher.
type Stack struct {
	cfg    Config
	log    *slog.Logger
	policy atomic.Pointer[policy.Policy]
	stats  Stats

	gs     *stack.Stack
	link   *link
	dns    *FakeDNS
	drops  *dropLog
	dnsLog *dnsLog
	flows  FlowHandler
	gro    gro // only touched by the Serve goroutine

	flowSlots, dnsSlots slots
	quic                quicFlows
	synCapSeen          atomic.Uint64 // gVisor's in-flight drops already recorded
	storeDown           atomic.Bool   // the recorder refused the last Admit
	wildCapWarned       atomic.Bool
	asks                asks
	flusherDone         chan struct{}

	// guestMAC is the locked guest MAC (6 bytes) or empty.
	macMu    sync.Mutex
	guestMAC tcpip.LinkAddress

	ctx     context.Context
	cancel  context.CancelFunc
	flowMu  sync.Mutex // orders flowStart against Close
	flowsWG sync.WaitGroup
	closed  atomic.Bool
}

// New builds a Stack. It does not start serving: call Serve with a guest
// connection.
func New(cfg Config) (*Stack, error) {
	if cfg.Policy == nil {
		return nil, errors.New("netstack: Config.Policy is nil (use policy.DenyAll() to deny everything)")
	}
	if cfg.Recorder == nil {
		return nil, errors.New("netstack: Config.Recorder is nil: every decision must be recorded")
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MTU < 576 || cfg.MTU > MaxMTU {
		return nil, fmt.Errorf("netstack: MTU %d out of range: use 576..%d", cfg.MTU, MaxMTU)
	}
	if cfg.MaxInFlightSYN == 0 {
		cfg.MaxInFlightSYN = DefaultMaxInFlightSYN
	}
	if cfg.MaxFlows == 0 {
		cfg.MaxFlows = DefaultMaxFlows
	}
	if cfg.MaxDNSTCPConns == 0 {
		cfg.MaxDNSTCPConns = DefaultMaxDNSTCPConns
	}
	if cfg.MaxQUICHandshakes == 0 {
		cfg.MaxQUICHandshakes = DefaultMaxQUICHandshakes
	}
	if cfg.QUICIdleTimeout == 0 {
		cfg.QUICIdleTimeout = DefaultQUICIdleTimeout
	}
	if cfg.MaxInFlightSYN < 0 || cfg.MaxFlows < 0 || cfg.MaxDNSTCPConns < 0 || cfg.MaxQUICHandshakes < 0 || cfg.QUICIdleTimeout < 0 {
		return nil, fmt.Errorf("netstack: negative limit (MaxInFlightSYN %d, MaxFlows %d, MaxDNSTCPConns %d, MaxQUICHandshakes %d, QUICIdleTimeout %s): use a positive number, or 0 for the default",
			cfg.MaxInFlightSYN, cfg.MaxFlows, cfg.MaxDNSTCPConns, cfg.MaxQUICHandshakes, cfg.QUICIdleTimeout)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		d := &net.Dialer{}
		cfg.Dial = d.DialContext
	}
	if cfg.GuestMAC != nil && len(cfg.GuestMAC) != 6 {
		return nil, fmt.Errorf("netstack: guest MAC %s is not a 6-byte Ethernet address", cfg.GuestMAC)
	}
	if cfg.Flows == nil {
		cfg.Flows = Splice
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Stack{cfg: cfg, log: cfg.Logger, dns: NewFakeDNS(), flows: cfg.Flows}
	notePlaceholders(cfg.Recorder, cfg.Policy)
	s.policy.Store(cfg.Policy)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.drops = newDropLog(cfg.Recorder, &s.stats)
	s.dnsLog = newDNSLog(cfg.Recorder)
	s.flowSlots.max = int64(cfg.MaxFlows)
	s.dnsSlots.max = int64(cfg.MaxDNSTCPConns)
	s.quic.handshakes.max = int64(cfg.MaxQUICHandshakes)
	s.asks.held.max = maxHeldAsks
	s.link = newLink(cfg.MTU, tcpip.LinkAddress(GatewayMAC), &s.stats)
	s.link.tap = cfg.Tap
	if cfg.GuestMAC != nil {
		s.guestMAC = tcpip.LinkAddress(cfg.GuestMAC)
	}
	if err := s.buildGVisor(); err != nil {
		return nil, err
	}
	s.flusherDone = make(chan struct{})
	go s.flushAggregates()
	return s, nil
}

// flushAggregates records, every second, the counts of rate-limited events
// whose flood has stopped, so that they reach the store while the session
// runs rather than only when it ends.
func (s *Stack) flushAggregates() {
	defer close(s.flusherDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.drops.flushStale(now)
			s.dnsLog.flushStale(now)
		}
	}
}

func (s *Stack) buildGVisor() error {
	gs := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, icmp.NewProtocol4},
	})
	s.gs = gs
	if err := gs.CreateNIC(nicID, s.link); err != nil {
		return fmt.Errorf("netstack: create NIC: %s", err)
	}
	addr := tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddrFrom4(GatewayIP.As4()).WithPrefix(),
	}
	addr.AddressWithPrefix.PrefixLen = LinkPrefix.Bits()
	if err := gs.AddProtocolAddress(nicID, addr, stack.AddressProperties{}); err != nil {
		return fmt.Errorf("netstack: add gateway address: %s", err)
	}
	// The stack answers for any destination (promiscuous) and sends from
	// any source (spoofing): a synthetic 198.19.x.y, or 1.1.1.1 for DNS.
	if err := gs.SetPromiscuousMode(nicID, true); err != nil {
		return fmt.Errorf("netstack: promiscuous mode: %s", err)
	}
	if err := gs.SetSpoofing(nicID, true); err != nil {
		return fmt.Errorf("netstack: spoofing: %s", err)
	}
	subnet, _ := tcpip.NewSubnet(tcpip.AddrFrom4(LinkPrefix.Addr().As4()), tcpip.MaskFromBytes(net.CIDRMask(LinkPrefix.Bits(), 32)))
	gs.SetRouteTable([]tcpip.Route{{Destination: subnet, NIC: nicID}})

	sack := tcpip.TCPSACKEnabled(true)
	gs.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20}
	gs.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20}
	gs.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	gs.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate)
	// Loss recovery without RACK: classic SACK recovery (RFC 6675), RTO
	// behind it. gVisor's RACK walks every segment in flight on every ACK
	// (rackControl.detectLoss), quadratic in the window: at MTU 1500 it was
	// 14 % of capsem-net's CPU in a download to the guest. Without it the
	// download went 0.92/1.22 → 1.59/1.54 Gbit/s in paired runs (`go run
	// ./bench/netbench -t 6s -reps 3 -peers capsem-net -mtus 1500 -skip
	// conn`); jumbo frames, a few dozen segments in flight, did not move.
	// What RACK recovers faster is loss, and nothing between this stack and
	// the guest drops: the link blocks a producer when its queue is full and
	// QEMU reads the socket only when the guest has buffers. On a pump made
	// to lose 2 % of the data frames (TestLossyLinkRecovers) 8 MiB each way
	// took 2.7 s instead of 0.6 s (1.3–1.7 s once the link took GSO,
	// link.go) — still fast retransmit, not a timeout per loss.
	recovery := tcpip.TCPRecovery(0)
	gs.SetTransportProtocolOption(tcp.ProtocolNumber, &recovery)

	fwd := tcp.NewForwarder(gs, 0, s.cfg.MaxInFlightSYN, s.handleTCP)
	gs.SetTransportProtocolHandler(tcp.ProtocolNumber, s.synHandler(fwd))
	if s.guestMAC != "" {
		s.addGuestNeighbor(s.guestMAC)
	}
	return nil
}

func (s *Stack) addGuestNeighbor(mac tcpip.LinkAddress) {
	s.gs.AddStaticNeighbor(nicID, ipv4.ProtocolNumber, tcpip.AddrFrom4(GuestIP.As4()), mac)
}

// SetPolicy swaps the policy. Flows and queries that start after the call
// see the new policy; running flows keep the decision they were given.
func (s *Stack) SetPolicy(p *policy.Policy) {
	if p != nil {
		notePlaceholders(s.cfg.Recorder, p)
		s.policy.Store(p)
	}
}

// Policy returns the policy in force.
func (s *Stack) Policy() *policy.Policy { return s.policy.Load() }

// Stats returns the live counters.
func (s *Stack) Stats() *Stats { return &s.stats }

// Snapshot returns the stack's counters, with gVisor's count of SYNs
// ignored because MaxInFlightSYN handshakes were already pending, and the
// fake-DNS table's figures.
func (s *Stack) Snapshot() map[string]uint64 {
	m := s.stats.Snapshot()
	m["syn_inflight_drops"] = s.gs.Stats().TCP.ForwardMaxInFlightDrop.Value()
	held, wild, recycled := s.dns.poolStats()
	m["dns_names_held"] = uint64(held)
	m["dns_wildcard_names"] = uint64(wild)
	m["dns_recycled"] = recycled
	return m
}

// Serve pumps frames between conn and the stack until conn fails, ctx is
// done or the stack is closed. A clean end of the guest's stream returns nil.
// Serve closes conn.
func (s *Stack) Serve(ctx context.Context, conn FrameConn) error {
	if s.closed.Load() {
		conn.Close()
		return net.ErrClosed
	}
	detach := s.link.attach(conn)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	stopClose := context.AfterFunc(s.ctx, func() { conn.Close() })
	defer func() {
		stop()
		stopClose()
		conn.Close()
		detach()
		if s.cfg.GuestMAC == nil {
			// The next connection may be a different guest.
			s.macMu.Lock()
			if s.guestMAC != "" {
				s.gs.RemoveNeighbor(nicID, ipv4.ProtocolNumber, tcpip.AddrFrom4(GuestIP.As4()))
			}
			s.guestMAC = ""
			s.macMu.Unlock()
		}
	}()
	buffered, _ := conn.(interface{ Buffered() bool })
	defer s.groFlush()
	for {
		frame, err := conn.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || ctx.Err() != nil || s.ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("netstack: reading guest frames: %w", err)
		}
		s.stats.FramesIn.Add(1)
		if s.cfg.Tap != nil {
			s.cfg.Tap(FromGuest, frame)
		}
		s.inbound(frame, buffered != nil && buffered.Buffered())
	}
}

// Close ends every flow, waits for their events to be recorded, flushes
// rate-limited drop counts and stops the stack.
func (s *Stack) Close() error {
	s.flowMu.Lock()
	if s.closed.Load() {
		s.flowMu.Unlock()
		return nil
	}
	s.closed.Store(true)
	s.flowMu.Unlock()
	s.cancel()
	s.flowsWG.Wait()
	<-s.flusherDone
	s.drops.flush()
	s.dnsLog.flush()
	s.gs.Close()
	s.gs.Wait()
	return nil
}

// checkGuestMAC reports whether src (6 bytes of a frame) is the guest's
// MAC, locking the guest MAC to src when none is locked yet. It compares
// without converting, so the per-frame check does not allocate.
func (s *Stack) checkGuestMAC(src []byte) bool {
	s.macMu.Lock()
	defer s.macMu.Unlock()
	if s.guestMAC == "" {
		s.guestMAC = tcpip.LinkAddress(src)
		s.addGuestNeighbor(s.guestMAC)
		return true
	}
	return string(s.guestMAC) == string(src)
}

func (s *Stack) guestLink() tcpip.LinkAddress {
	s.macMu.Lock()
	defer s.macMu.Unlock()
	return s.guestMAC
}
