package filter

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/mcpgate"
	"github.com/capsem/capsem/mitm"
	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
)

// Config is what one filter needs. Zero values are the netstack's
// defaults.
type Config struct {
	// Policy is the policy in force at the start; SetPolicy and Reload
	// replace it. Required (policy.DenyAll() denies everything).
	Policy *policy.Policy
	// Recorder gets every event of the netstack, the MITM and the gateway.
	// Required.
	Recorder netstack.Recorder
	// Authority is the interception CA the guest trusts. Required.
	Authority *ca.Authority
	// Logger for operational messages (not events). Nil means
	// slog.Default().
	Logger *slog.Logger
	// MTU of the guest link, 576..65520. Zero means netstack.DefaultMTU.
	MTU uint32
	// GuestMAC pins the guest's MAC. Nil means the first source MAC seen.
	GuestMAC net.HardwareAddr
	// Tap sees every frame both ways (pcap). Nil: none.
	Tap netstack.FrameTap
	// DialTimeout bounds an upstream dial while the guest's SYN waits.
	// Zero means netstack.DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxFlows caps the guest's open TCP connections. Zero means
	// netstack.DefaultMaxFlows.
	MaxFlows int
	// MaxDNSTCPConns caps the guest's open DNS-over-TCP connections. Zero
	// means netstack.DefaultMaxDNSTCPConns.
	MaxDNSTCPConns int
	// Overlay keeps a sandbox's "always" answers, laid over every policy
	// set. Nil: none is kept, and an "always" answer is refused.
	Overlay Overlay
}

// Filter is one guest's network: the netstack, the MITM behind it and the
// MCP gateway the MITM serves.
type Filter struct {
	stack   *netstack.Stack
	proxy   *mitm.Proxy
	gateway *mcpgate.Gateway // serves [mcp.servers] to the guest
	asks    *ask.Broker      // what the policy did not foresee, put to a person

	grantMu sync.Mutex     // orders grants and policy swaps
	file    *policy.Policy // the policy set, before the grants
	session policy.Grants  // this session's "session" answers
	overlay Overlay        // Config.Overlay

	closeOnce sync.Once
	closeErr  error
}

// New wires the netstack, the MITM and the MCP gateway. On error nothing
// it started is left running.
func New(cfg Config) (*Filter, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	f := &Filter{file: cfg.Policy, overlay: cfg.Overlay}
	f.asks = ask.New(ask.Config{Grant: f.grant})
	pol, err := f.lay(cfg.Policy)
	if err != nil {
		return nil, err
	}
	// The MCP gateway reaches remote servers as the netstack reaches any
	// upstream, verified as the MITM verifies any, under the policy in
	// force.
	f.gateway = mcpgate.New(mcpgate.Config{
		Recorder:     cfg.Recorder,
		Log:          log,
		PreviewBytes: pol.PreviewBytes(),
		DialContext: mcpgate.PortDialer(func(ctx context.Context, name string, port uint16) (net.Conn, error) {
			return f.stack.DialUpstream(ctx, name, port)
		}),
		Roots: func() (*x509.CertPool, error) { return f.proxy.UpstreamRoots(f.stack.Policy()) },
		Asks:  f.asks,
	})
	f.gateway.ApplyPolicy(pol)
	f.proxy, err = mitm.New(mitm.Config{CA: cfg.Authority, Recorder: cfg.Recorder, Logger: log, MCPGateway: f.gateway, Asks: f.asks})
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	f.stack, err = netstack.New(netstack.Config{
		MTU:            cfg.MTU,
		Policy:         pol,
		Recorder:       cfg.Recorder,
		Asker:          f.asks,
		GuestMAC:       cfg.GuestMAC,
		Tap:            cfg.Tap,
		Logger:         log,
		DialTimeout:    cfg.DialTimeout,
		MaxFlows:       cfg.MaxFlows,
		MaxDNSTCPConns: cfg.MaxDNSTCPConns,
		Flows:          f.proxy.HandleFlow,
		Pooled:         f.proxy.Pooled,
		QUICFlows:      f.proxy.HandleQUIC,
	})
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// Serve pumps the guest's frames through the netstack until conn fails,
// ctx is done or the filter is closed (netstack.Stack.Serve); it closes
// conn.
func (f *Filter) Serve(ctx context.Context, conn netstack.FrameConn) error {
	return f.stack.Serve(ctx, conn)
}

// Inbound carries a connection accepted on a published host port into
// the guest (netstack.Stack.Inbound).
func (f *Filter) Inbound(ctx context.Context, client net.Conn, in netstack.Inbound) error {
	return f.stack.Inbound(ctx, client, in)
}

// Snapshot returns the netstack's counters, for the log at exit.
func (f *Filter) Snapshot() map[string]uint64 { return f.stack.Snapshot() }

// Close stops the netstack (waiting for its flows to end), then the MITM,
// then the gateway's stdio servers. Calls after the first return the
// first's result.
func (f *Filter) Close() error {
	f.closeOnce.Do(func() {
		if f.stack != nil {
			_ = f.stack.Close()
		}
		if f.proxy != nil {
			f.closeErr = f.proxy.Close()
		}
		if f.gateway != nil {
			_ = f.gateway.Close()
		}
	})
	return f.closeErr
}
