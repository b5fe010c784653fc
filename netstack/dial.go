package netstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/capsem/capsem/policy"
)

// DialUpstream connects to name:port on the host's side as a flow's
// upstream is, under the policy in force: [upstream] resolve, private
// answers refused unless allow_private, and through [upstream] proxy when
// one is set. It does not decide whether name is allowed: its caller
// connects to what the policy file itself names (the url of an MCP
// gateway server).
func (s *Stack) DialUpstream(ctx context.Context, name string, port uint16) (net.Conn, error) {
	c, _, _, err := s.dialUpstream(ctx, s.policy.Load(), name, port)
	return c, err
}

// dialUpstream connects to the real endpoint of an allowed name
// (resolveUpstream says which), or through the policy's proxy (the one
// place every upstream TCP connection is made: flows, the MITM's
// redials, the MCP gateway's remote servers). where says what it reached,
// for the flow's event.
func (s *Stack) dialUpstream(ctx context.Context, pol *policy.Policy, name string, port uint16) (c net.Conn, where, reason string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	if x := pol.ProxyFor(name); x != nil {
		c, reason, err = s.dialProxy(ctx, pol, x, name, port)
		return c, "via the proxy " + x.Addr, reason, err
	}
	ips, port, reason, err := s.resolveUpstream(ctx, pol, name, port)
	if err != nil {
		return nil, "", reason, err
	}
	c, ap, reason, err := s.dialAddrs(ctx, ips, port)
	return c, ap.String(), reason, err
}

// resolveUpstream returns the real addresses of an allowed name and the
// port to reach them on. A name pinned to a literal IP in [upstream]
// resolve is trusted as written; any other name is resolved by the host,
// and answers in loopback, private, link-local, metadata or other special
// ranges are refused unless the policy sets allow_private (DNS rebinding).
func (s *Stack) resolveUpstream(ctx context.Context, pol *policy.Policy, name string, port uint16) ([]netip.Addr, uint16, string, error) {
	host := name
	if t, ok := pol.Resolve(name); ok {
		host = t.Host
		if t.Port != 0 {
			port = t.Port
		}
		if t.Pinned {
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return nil, port, ReasonUpstreamNoAddr, fmt.Errorf("resolve target %q: %w", host, err)
			}
			return []netip.Addr{ip}, port, "", nil
		}
	}
	ips, err := s.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, port, ReasonUpstreamNoAddr, fmt.Errorf("host lookup of %s: %w", host, err)
	}
	var usable []netip.Addr
	var refused []string
	for _, ip := range ips {
		ip = ip.Unmap()
		if !pol.AllowPrivate && IsSpecialAddr(ip) {
			refused = append(refused, ip.String())
			continue
		}
		usable = append(usable, ip)
	}
	if len(usable) == 0 {
		if len(refused) > 0 {
			return nil, port, ReasonUpstreamPrivate,
				fmt.Errorf("%s resolved to %v, a private or special address; set [upstream] allow_private = true to allow it", host, refused)
		}
		return nil, port, ReasonUpstreamNoAddr, fmt.Errorf("host lookup of %s returned no address", host)
	}
	return usable, port, "", nil
}

// redial is a Flow's Redial: a TCP connection to name:port, decided again
// under pol.
func (s *Stack) redial(name string, port uint16, local bool) func(context.Context, *policy.Policy) (net.Conn, error) {
	return func(ctx context.Context, pol *policy.Policy) (net.Conn, error) {
		if err := recheck(pol, name, port, local); err != nil {
			return nil, err
		}
		c, _, _, err := s.dialUpstream(ctx, pol, name, port)
		return c, err
	}
}

// recheck is what a flow's Redial and Upstream decide before they reach
// the upstream again: a local flow has none, and pol, which may not be the
// policy the flow was allowed under, must still allow name:port.
func recheck(pol *policy.Policy, name string, port uint16, local bool) error {
	if local {
		return fmt.Errorf("%s is served by capsem itself and has no upstream", name)
	}
	if d := pol.DecideFlow(name, port); !d.Allowed {
		return fmt.Errorf("%s:%d is no longer allowed: %s", name, port, d.Reason)
	}
	return nil
}

// upstreamAddrs is a Flow's Upstream: the addresses of name:port, decided
// again under pol.
func (s *Stack) upstreamAddrs(name string, port uint16, local bool) func(context.Context, *policy.Policy) ([]netip.AddrPort, error) {
	return func(ctx context.Context, pol *policy.Policy) ([]netip.AddrPort, error) {
		if err := recheck(pol, name, port, local); err != nil {
			return nil, err
		}
		if x := pol.ProxyFor(name); x != nil {
			return nil, fmt.Errorf("%s is reached through the proxy %s, by TCP only", name, x.URL)
		}
		ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
		defer cancel()
		ips, p, _, err := s.resolveUpstream(ctx, pol, name, port)
		if err != nil {
			return nil, err
		}
		out := make([]netip.AddrPort, len(ips))
		for i, ip := range ips {
			out[i] = netip.AddrPortFrom(ip, p)
		}
		return out, nil
	}
}

func (s *Stack) dialAddrs(ctx context.Context, ips []netip.Addr, port uint16) (net.Conn, netip.AddrPort, string, error) {
	var errs []error
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip, port)
		c, err := s.cfg.Dial(ctx, "tcp", ap.String())
		if err == nil {
			return c, ap, "", nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, ReasonUpstreamFailed, errors.Join(errs...)
}

var specialPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // RFC 1918
		"100.64.0.0/10",   // carrier-grade NAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata
		"172.16.0.0/12",   // RFC 1918
		"192.0.0.0/24",    // IETF protocol assignments
		"192.168.0.0/16",  // RFC 1918
		"198.18.0.0/15",   // benchmarking: capsem's own guest link and pool
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"64:ff9b::/96",    // NAT64: may embed any IPv4 address
		"64:ff9b:1::/48",  // local-use NAT64
		"fc00::/7",        // unique local (includes fd00:ec2::254 metadata)
		"fe80::/10",       // link-local
		"ff00::/8",        // multicast
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4: embeds an IPv4 address
		"::ffff:0:0/96",   // IPv4-mapped (normally unmapped first)
		"100::/64",        // discard
		"2001::/23",       // IETF special purpose (Teredo etc.)
		"192.0.2.0/24",    // documentation
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// IsSpecialAddr reports whether ip is loopback, private, link-local,
// metadata, multicast or otherwise not a public unicast address: an upstream
// answer in these ranges is a DNS-rebinding attempt unless the policy says
// allow_private.
func IsSpecialAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range specialPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
