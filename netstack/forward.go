package netstack

import (
	"context"
	"fmt"
	"net"

	"github.com/capsem/capsem/policy"
)

// [[forward]] flows (policy.Forward): the guest dials a name the table
// names, on its port; fake DNS answered the name like an allowed one, and
// the SYN is decided like any (syn.go), but what is dialled is exactly the
// table's host service — an address the user wrote, private or loopback
// as it may be, or a unix socket — and the flow is spliced, never given to
// the flow handler (the MITM): the guest speaks to the service itself.
// The flow is recorded as allowed, reason forwarded; a service that does
// not accept is forward-unreachable and the guest's SYN gets a RST. QUIC
// to a forwarded name is refused (quic-unserved): a forward carries TCP.

// dialForward connects to a [[forward]] table's host service.
func (s *Stack) dialForward(ctx context.Context, fw policy.Forward) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, fw.Network, fw.Addr)
	if err != nil {
		return nil, fmt.Errorf("the host service of %s did not accept the connection: %w", fw.Rule, err)
	}
	return c, nil
}
