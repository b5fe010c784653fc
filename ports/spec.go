package ports

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultHostIP is the host address a spec without one listens on: this
// host only.
var DefaultHostIP = netip.MustParseAddr("127.0.0.1")

// Spec is one published port.
type Spec struct {
	HostIP    netip.Addr // the host address listened on (DefaultHostIP unless given)
	HostPort  uint16     // the host port; 0 takes a free one (Publisher.Add says which)
	GuestPort uint16     // the guest's port connections go to
}

// ErrBadSpec wraps every error of ParseSpec.
var ErrBadSpec = errors.New("ports: not a publish spec")

// specForm is the form every spec error names.
const specForm = "[HOSTIP:]HOSTPORT:GUESTPORT[/tcp], e.g. 8080:80 or 127.0.0.1:0:3000"

// ParseSpec parses [HOSTIP:]HOSTPORT:GUESTPORT[/tcp]. HOSTIP is an IPv4
// address or a bracketed IPv6 one ([::1]); a name is refused, so that
// what is listened on is what was written.
func ParseSpec(s string) (Spec, error) {
	fail := func(why string) (Spec, error) {
		return Spec{}, fmt.Errorf("%w: %q: %s (the form is %s)", ErrBadSpec, s, why, specForm)
	}
	body := s
	if i := strings.LastIndexByte(body, '/'); i >= 0 {
		switch proto := body[i+1:]; proto {
		case "tcp":
		case "udp":
			return fail("only TCP ports are published")
		default:
			return fail(fmt.Sprintf("unknown protocol %q", proto))
		}
		body = body[:i]
	}
	var sp Spec
	sp.HostIP = DefaultHostIP
	if strings.HasPrefix(body, "[") {
		end := strings.Index(body, "]:")
		if end < 0 {
			return fail("an IPv6 host address is written [ADDR]:HOSTPORT:GUESTPORT")
		}
		ip, err := netip.ParseAddr(body[1:end])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return fail(fmt.Sprintf("%q is not an IPv6 address", body[1:end]))
		}
		sp.HostIP, body = ip, body[end+2:]
	}
	parts := strings.Split(body, ":")
	switch len(parts) {
	case 2:
	case 3:
		if sp.HostIP != DefaultHostIP || strings.HasPrefix(s, "[") {
			return fail("two host addresses")
		}
		ip, err := netip.ParseAddr(parts[0])
		if err != nil || !ip.Is4() {
			return fail(fmt.Sprintf("%q is not an IP address (an IPv6 one goes in brackets)", parts[0]))
		}
		sp.HostIP, parts = ip, parts[1:]
	default:
		return fail("want a host port and a guest port")
	}
	hp, err := parsePort(parts[0], true)
	if err != nil {
		return fail("host port: " + err.Error())
	}
	gp, err := parsePort(parts[1], false)
	if err != nil {
		return fail("guest port: " + err.Error())
	}
	sp.HostPort, sp.GuestPort = hp, gp
	return sp, nil
}

func parsePort(s string, zeroOK bool) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || (s != "0" && strings.HasPrefix(s, "0")) {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	if n == 0 && !zeroOK {
		return 0, errors.New("0 is no port (only the host port may be 0, for a free one)")
	}
	return uint16(n), nil
}

// String is the spec in its full form, HOSTIP:HOSTPORT:GUESTPORT/tcp, as
// ParseSpec reads it.
func (s Spec) String() string {
	return netip.AddrPortFrom(s.HostIP, s.HostPort).String() + ":" + strconv.Itoa(int(s.GuestPort)) + "/tcp"
}

// HostAddr is the host address and port listened on.
func (s Spec) HostAddr() netip.AddrPort { return netip.AddrPortFrom(s.HostIP, s.HostPort) }

// Names reports whether spec t, given to unpublish, names s: the same
// host address and port, or (a host port 0) exactly s, as published.
func (s Spec) Names(t Spec) bool {
	if t.HostPort == 0 {
		return s == t
	}
	return s.HostAddr() == t.HostAddr()
}

// Taken returns the spec of published that already holds sp's host
// address and port: a sandbox publishes a host port once. A free-port
// spec (host port 0) conflicts with nothing.
func Taken(published []Spec, sp Spec) (Spec, bool) {
	if sp.HostPort == 0 {
		return Spec{}, false
	}
	for _, q := range published {
		if q.HostAddr() == sp.HostAddr() {
			return q, true
		}
	}
	return Spec{}, false
}
